/**
 * One agent turn of a session: the ReAct tool loop against the upstream model, recorded through
 * `@ctxo/history` as it goes, streamed as events.
 *
 * 1. Compaction (seed 002 C7) when the last usage plus the new input reaches the trigger; its
 *    progress is streamed (started, finished or fell back).
 * 2. The input is recorded once (`startTurn`, with the client's idempotency key): a retry of the
 *    same key resumes the turn; a retry of a finished turn returns its recorded answer.
 * 3. Each step: compile the session's context (the running turn is part of it), call the model
 *    with the tools, stream its text; a tool call is recorded with its words, run, and its result
 *    recorded compressed; the loop ends with the final answer (recorded) or the step limit.
 * Only whole steps are recorded: an upstream failure (timeout, 5xx, a broken stream) leaves the
 * turn resumable, never half a message. Turns of one session run one at a time.
 */
import { ModelRegistry } from "@ctxo/budget/ModelRegistry"
import { Tokenizer } from "@ctxo/budget/Tokenizer"
import { compile } from "@ctxo/compiler/Compile"
import { parseManifest } from "@ctxo/compiler/Manifest"
import type { Workspace } from "@ctxo/compiler/Workspace"
import { compact } from "@ctxo/history/Compaction"
import { HistoryStore } from "@ctxo/history/HistoryStore"
import { createReadTracker, type ReadTracker } from "@ctxo/history/ReadTracker"
import { endTurn, recordStep, recordToolResult, startTurn } from "@ctxo/history/Recorder"
import type { Summarizer } from "@ctxo/history/Summarizer"
import { Store } from "@ctxo/store/Store"
import { Effect, Either, Queue, Stream } from "effect"
import { ModelClient } from "./ModelClient.ts"
import { runTool, toolDefinitions } from "./Tools.ts"

export type ChatEvent =
  | { readonly type: "turn"; readonly turn: number; readonly resumed: boolean }
  | {
      readonly type: "compaction-started"
      readonly archivedTurns: ReadonlyArray<number>
      readonly keptTurns: ReadonlyArray<number>
    }
  | {
      readonly type: "compaction-finished"
      readonly summaryId: string | null
      readonly archivedMessages: number
    }
  | { readonly type: "compaction-fell-back"; readonly message: string }
  | { readonly type: "text-delta"; readonly text: string }
  | { readonly type: "tool-call"; readonly id: string; readonly name: string; readonly arguments: string }
  | { readonly type: "tool-result"; readonly id: string; readonly name: string; readonly result: unknown }
  | { readonly type: "usage"; readonly inputTokens: number; readonly outputTokens: number }
  | { readonly type: "done"; readonly turn: number; readonly text: string; readonly steps: number }
  | { readonly type: "error"; readonly tag: string; readonly message: string }

export interface AgentOptions {
  /** The model of sessions whose manifest names none (and the client none). */
  readonly defaultModel: string
  /** Tool steps per turn. */
  readonly maxSteps: number
  /** When this completes, open turns stop and their streams end with a `Shutdown` error event. */
  readonly stop?: Effect.Effect<void>
}

export interface ChatInput {
  readonly sessionId: string
  /** Whose session it is (a tenant): sessions of different scopes never share state. */
  readonly scope?: string
  readonly message: string
  readonly model?: string
  readonly idempotencyKey?: string
}

type ChatRequirements =
  | Store
  | HistoryStore
  | Summarizer
  | Workspace
  | ModelRegistry
  | Tokenizer
  | ModelClient

// Per session: one turn at a time, the last reported usage (the compaction trigger) and the reads.
const sessions = new Map<string, { lock: Effect.Semaphore; lastUsage: number; tracker: ReadTracker }>()
const sessionState = (id: string, scope = "") => {
  const key = `${scope}\u0000${id}`
  let state = sessions.get(key)
  if (state === undefined) {
    state = { lock: Effect.unsafeMakeSemaphore(1), lastUsage: 0, tracker: createReadTracker() }
    sessions.set(key, state)
  }
  return state
}

/** Runs `effect` as the session's only turn in flight (chat turns and API completions share it). */
export const withSessionTurn = <A, E, R>(sessionId: string, effect: Effect.Effect<A, E, R>, scope?: string) =>
  sessionState(sessionId, scope).lock.withPermits(1)(effect)

/** Records the provider's reported usage of a session's last request (the compaction trigger). */
export const observeUsage = (sessionId: string, tokens: number, scope?: string) => {
  sessionState(sessionId, scope).lastUsage = tokens
}

const runTurn = (input: ChatInput, options: AgentOptions, emit: (event: ChatEvent) => Effect.Effect<void>) =>
  Effect.gen(function* () {
    const registry = yield* ModelRegistry
    const tokenizer = yield* Tokenizer
    const client = yield* ModelClient
    const history = yield* HistoryStore
    const sid = input.sessionId
    const state = sessionState(sid, input.scope)
    // The client's model, else the session manifest's, else the gateway's default.
    const store = yield* Store
    const manifestText = yield* store.readFile(sid, "context-config.json").pipe(
      Effect.map((f) => f.content),
      Effect.catchTag("FileNotFound", () => Effect.succeed("{}"))
    )
    const manifest = yield* Either.match(parseManifest(manifestText, `${sid}/context-config.json`), {
      onLeft: Effect.fail,
      onRight: Effect.succeed
    })
    const modelName = input.model ?? manifest.model ?? options.defaultModel

    const model = yield* registry.resolve(modelName)
    const counter = yield* tokenizer.counter(model)
    const compaction = yield* compact({
      sessionId: sid,
      input: input.message,
      lastUsage: state.lastUsage,
      model: { id: model.id, contextWindow: model.contextWindow },
      count: counter.count,
      onEvent: (event) =>
        event._tag === "Started"
          ? emit({
              type: "compaction-started",
              archivedTurns: event.archivedTurns,
              keptTurns: event.keptTurns
            })
          : event._tag === "Finished"
            ? emit({
                type: "compaction-finished",
                summaryId: event.summaryId ?? null,
                archivedMessages: event.archivedMessages
              })
            : event._tag === "FellBack"
              ? emit({ type: "compaction-fell-back", message: event.message })
              : Effect.void
    })
    if (compaction.status === "compacted" || compaction.status === "fell-back")
      state.lastUsage = compaction.remaining ?? 0

    const began = yield* startTurn(sid, {
      input: input.message,
      ...(input.idempotencyKey === undefined ? {} : { inputKey: input.idempotencyKey })
    })
    yield* emit({ type: "turn", turn: began.turn, resumed: began.resumed })
    if (began.finished) {
      const doc = yield* history.load(sid)
      const answer = doc.messages.find((m) => m.meta.turn === began.turn && m.meta.kind === "final")
      const text = answer?.parts.map((p) => (p._tag === "text" ? p.text : "")).join("") ?? ""
      yield* emit({ type: "done", turn: began.turn, text, steps: 0 })
      return
    }

    for (let step = 1; step <= options.maxSteps; step++) {
      const doc = yield* history.load(sid)
      const compiled = yield* compile({
        sessionId: sid,
        model: modelName,
        format: "openai",
        history: doc,
        query: ""
      })
      const messages = (compiled.request as { messages: ReadonlyArray<Record<string, unknown>> }).messages
      let done: Extract<import("./ModelClient.ts").CompletionEvent, { _tag: "Done" }> | undefined
      yield* client.complete({ model: model.name, messages, tools: toolDefinitions }).pipe(
        Stream.runForEach((event) =>
          event._tag === "TextDelta"
            ? emit({ type: "text-delta", text: event.text })
            : Effect.sync(() => {
                done = event
              })
        )
      )
      if (done === undefined) return
      if (done.usage !== undefined) {
        state.lastUsage = done.usage.inputTokens + done.usage.outputTokens
        yield* emit({ type: "usage", ...done.usage })
      }
      if (done.toolCalls.length === 0) {
        yield* endTurn(sid, began.turn, done.text)
        yield* emit({ type: "done", turn: began.turn, text: done.text, steps: step - 1 })
        return
      }
      for (const [i, call] of done.toolCalls.entries()) {
        let parsed: unknown
        try {
          parsed = JSON.parse(call.arguments === "" ? "{}" : call.arguments)
        } catch {
          parsed = { raw: call.arguments }
        }
        yield* recordStep(sid, began.turn, {
          ...(i === 0 && done.text !== "" ? { text: done.text } : {}),
          toolCall: { callId: call.id, name: call.name, input: parsed }
        })
        yield* emit({ type: "tool-call", id: call.id, name: call.name, arguments: call.arguments })
        const result = yield* runTool(sid, call.name, call.arguments, state.tracker)
        yield* recordToolResult(sid, began.turn, { callId: call.id, name: call.name }, result)
        yield* emit({ type: "tool-result", id: call.id, name: call.name, result })
      }
    }
    const text = `Stopped after ${options.maxSteps} tool steps.`
    yield* endTurn(sid, began.turn, text)
    yield* emit({ type: "done", turn: began.turn, text, steps: options.maxSteps })
  })

/** The turn as a stream of events; a failure is the last event (`error`), never a broken stream. */
export const chat = (
  input: ChatInput,
  options: AgentOptions
): Stream.Stream<ChatEvent, never, ChatRequirements> =>
  Stream.unwrapScoped(
    Effect.gen(function* () {
      const queue = yield* Queue.unbounded<ChatEvent | null>()
      const emit = (event: ChatEvent) => Queue.offer(queue, event).pipe(Effect.asVoid)
      yield* sessionState(input.sessionId, input.scope)
        .lock.withPermits(1)(runTurn(input, options, emit))
        .pipe(
          Effect.catchAll((e) =>
            emit({
              type: "error",
              tag: "_tag" in e ? String(e._tag) : "Error",
              message: e.message
            })
          ),
          Effect.catchAllDefect((defect) => emit({ type: "error", tag: "Defect", message: String(defect) })),
          Effect.ensuring(Queue.offer(queue, null)),
          Effect.forkScoped
        )
      const events = Stream.fromQueue(queue).pipe(Stream.takeWhile((e): e is ChatEvent => e !== null))
      if (options.stop === undefined) return events
      // On stop the stream says so and ends; the turn (forked in this scope) is interrupted
      // between whole steps and can be resumed with the same idempotency key.
      const shutdown = Stream.fromEffect(options.stop).pipe(
        Stream.as<ChatEvent>({
          type: "error",
          tag: "Shutdown",
          message:
            "The gateway is shutting down; send the same message (and idempotency key) again to resume."
        })
      )
      return Stream.merge(events, shutdown, { haltStrategy: "either" })
    })
  )

/** One event as a Server-Sent Events frame. */
export const sseFrame = (event: ChatEvent): string =>
  `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`
