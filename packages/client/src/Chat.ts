/**
 * A chat turn over Server-Sent Events (`POST /api/sessions/:id/chat`): the events decoded with the
 * contract's `ChatEvent`, and a turn's state folded from them, its parts accumulated by
 * `@ctxo/history/PartAccumulator`, the module the gateway accumulates the same stream with (its
 * `done` event carries the parts it made; `ChatTurnState.partsMatchServer` compares).
 *
 * A retry sends the same message with the same `idempotencyKey`: the gateway resumes the turn, or
 * answers a finished one from history, and records the input once.
 */
import type { ChatRequest } from "@ctxo/api/Api"
import { ChatEvent } from "@ctxo/api/ChatEvent"
import type { Part } from "@ctxo/history/Message"
import { createPartAccumulator, pushChatEvent } from "@ctxo/history/PartAccumulator"
import type * as HttpClient from "@effect/platform/HttpClient"
import type { HttpClientError } from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { Data, Effect, Schema, Stream } from "effect"
import { type ClientOptions, type Connection, httpClient } from "./Client.ts"
import { createSseParser } from "./Sse.ts"

export type { ChatEvent } from "@ctxo/api/ChatEvent"
export type ChatBody = typeof ChatRequest.Type

/** The gateway refused the chat before its stream started (409 SessionNotActive, 404, 400, ...). */
export class ChatRefused extends Data.TaggedError("ChatRefused")<{
  readonly status: number
  readonly tag: string
  readonly message: string
  readonly details?: unknown
}> {}

/** The stream carried something that is not a chat event. */
export class ChatStreamInvalid extends Data.TaggedError("ChatStreamInvalid")<{ readonly message: string }> {}

const decodeEvent = Schema.decodeUnknown(Schema.parseJson(ChatEvent))

/** A new idempotency key: send it with the message, and again with a retry of the same message. */
export const newIdempotencyKey = (): string => `ui-${globalThis.crypto.randomUUID()}`

/** The turn's events as they arrive; fails with `ChatRefused` when the gateway answers with an error status. */
export const chatStream = (
  options: ClientOptions,
  sessionId: string,
  body: ChatBody
): Stream.Stream<ChatEvent, ChatRefused | ChatStreamInvalid | HttpClientError, HttpClient.HttpClient> =>
  Stream.unwrapScoped(
    Effect.gen(function* () {
      const client = yield* httpClient(options)
      const url = `${options.baseUrl.replace(/\/+$/, "")}/api/sessions/${encodeURIComponent(sessionId)}/chat`
      const response = yield* client.execute(
        HttpClientRequest.post(url).pipe(
          HttpClientRequest.bodyUnsafeJson(body),
          HttpClientRequest.setHeader("accept", "text/event-stream")
        )
      )
      if (response.status >= 400) {
        const text = yield* response.text
        let error: { tag?: unknown; message?: unknown; details?: unknown } = {}
        try {
          error = (JSON.parse(text) as { error?: typeof error }).error ?? {}
        } catch {}
        return yield* new ChatRefused({
          status: response.status,
          tag: typeof error.tag === "string" ? error.tag : `HTTP ${response.status}`,
          message: typeof error.message === "string" ? error.message : text.slice(0, 200),
          ...(error.details === undefined ? {} : { details: error.details })
        })
      }
      const parser = createSseParser()
      return response.stream.pipe(
        Stream.decodeText(),
        Stream.mapConcat((text) => parser.push(text)),
        Stream.concat(Stream.suspend(() => Stream.fromIterable(parser.end()))),
        Stream.mapEffect((frame) =>
          decodeEvent(frame.data).pipe(
            Effect.mapError(
              (e) =>
                new ChatStreamInvalid({ message: `event ${frame.event} is not a chat event: ${e.message}` })
            )
          )
        )
      )
    })
  )

export interface Compaction {
  readonly status: "running" | "finished" | "fell-back"
  readonly archivedTurns: ReadonlyArray<number>
  readonly keptTurns: ReadonlyArray<number>
  readonly summaryId?: string | null
  readonly archivedMessages?: number
  readonly message?: string
}

/** What a person watching a turn sees, as the events so far make it. */
export interface ChatTurnState {
  readonly turn?: number
  /** A retry resumed the turn (or answered a finished one from history). */
  readonly resumed: boolean
  /** Text, tool calls and tool results (whole, as the tool returned them), in order. */
  readonly parts: ReadonlyArray<Part>
  /** Text deltas received: a streamed answer arrives in several. */
  readonly deltas: number
  readonly compaction?: Compaction
  readonly usage?: { readonly inputTokens: number; readonly outputTokens: number }
  readonly done?: Extract<ChatEvent, { type: "done" }>
  /** Once done: the parts accumulated here are the gateway's (`done.parts`), as they must be. */
  readonly partsMatchServer?: boolean
  readonly error?: { readonly tag: string; readonly message: string }
}

export interface ChatTurn {
  readonly push: (event: ChatEvent) => ChatTurnState
  readonly state: () => ChatTurnState
}

/** Folds a turn's events into its state; the parts through the shared part accumulator. */
export const createChatTurn = (): ChatTurn => {
  const accumulator = createPartAccumulator()
  let state: ChatTurnState = { resumed: false, parts: [], deltas: 0 }
  return {
    push: (event) => {
      if (pushChatEvent(accumulator, event))
        state = {
          ...state,
          parts: accumulator.getParts(),
          deltas: state.deltas + (event.type === "text-delta" ? 1 : 0)
        }
      switch (event.type) {
        case "turn":
          state = { ...state, turn: event.turn, resumed: event.resumed }
          break
        case "compaction-started":
          state = {
            ...state,
            compaction: { status: "running", archivedTurns: event.archivedTurns, keptTurns: event.keptTurns }
          }
          break
        case "compaction-finished":
          state = {
            ...state,
            compaction: {
              archivedTurns: [],
              keptTurns: [],
              ...state.compaction,
              status: "finished",
              summaryId: event.summaryId,
              archivedMessages: event.archivedMessages
            }
          }
          break
        case "compaction-fell-back":
          state = {
            ...state,
            compaction: {
              archivedTurns: [],
              keptTurns: [],
              ...state.compaction,
              status: "fell-back",
              message: event.message
            }
          }
          break
        case "usage":
          state = { ...state, usage: { inputTokens: event.inputTokens, outputTokens: event.outputTokens } }
          break
        case "done":
          state = {
            ...state,
            done: event,
            turn: event.turn,
            // A finished turn answered again from history streams nothing: there is nothing to compare.
            ...(event.parts.length === 0 && state.parts.length === 0
              ? {}
              : { partsMatchServer: JSON.stringify(event.parts) === JSON.stringify(state.parts) })
          }
          break
        case "error":
          state = { ...state, error: { tag: event.tag, message: event.message } }
          break
      }
      return state
    },
    state: () => state
  }
}

export interface ChatHandlers {
  /** Each event with the turn's state after it. */
  readonly onEvent?: (event: ChatEvent, state: ChatTurnState) => void
  /** Stops reading (the gateway cancels the model call; the same key resumes the turn). */
  readonly signal?: AbortSignal
}

/**
 * A chat turn for promise code: resolves with the turn's last state (an `error` event is in
 * `state.error`); rejects with `ChatRefused` when the gateway refused it before the stream started,
 * or with the network's error.
 */
export const chat = (
  connection: Connection,
  sessionId: string,
  body: ChatBody,
  handlers: ChatHandlers = {}
): Promise<ChatTurnState> => {
  const turn = createChatTurn()
  return connection.run(
    chatStream(connection.options, sessionId, body).pipe(
      Stream.runForEach((event) =>
        Effect.sync(() => {
          const state = turn.push(event)
          handlers.onEvent?.(event, state)
        })
      ),
      Effect.map(() => turn.state())
    ),
    handlers.signal
  )
}
