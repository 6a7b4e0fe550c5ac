/**
 * One agent turn of a session over SSE: the turn engine (`TurnEngine`) driven by the upstream model
 * (streamed: its text arrives as `text-delta` events) and the agent's tools (run here, their full
 * results seen by the running turn, compressed in history), streamed as events.
 *
 * Only whole steps are recorded: an upstream failure (timeout, 5xx, a broken stream) leaves the
 * turn resumable, never half a message. Turns of one session run one at a time (the engine holds
 * the session's lock for the whole turn). A client that goes away interrupts its turn: the
 * upstream call is aborted and the session's lock released; a tool step (its call, run and
 * result) is recorded whole or not at all. A session that takes no turns (paused, ended) fails the
 * stream with `SessionNotActive` before its first event, so the caller can answer with a status.
 */
import type { InputReference, Part } from "@ctxo/history/Message"
import { createPartAccumulator, pushChatEvent } from "@ctxo/history/PartAccumulator"
import { Effect, Queue, Stream } from "effect"
import type { SessionNotActive } from "./Lifecycle.ts"
import { type CompletionEvent, ModelClient, type UpstreamError } from "./ModelClient.ts"
import { agentTools, runTool } from "./Tools.ts"
import { type Driver, TurnEngine, type TurnEvent } from "./TurnEngine.ts"

/**
 * The chat's events: the turn engine's, with `done` carrying the parts this stream streamed (text,
 * tool calls, tool results), accumulated by the part accumulator a client runs on the same events.
 */
export type ChatEvent =
  | Exclude<TurnEvent, { readonly type: "done" }>
  | (Extract<TurnEvent, { readonly type: "done" }> & { readonly parts: ReadonlyArray<Part> })

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
  readonly message: string
  readonly model?: string
  readonly idempotencyKey?: string
  /** References sent with the message (the manifest's shape): resolved each step of the turn. */
  readonly references?: ReadonlyArray<InputReference>
  /** The thinking-map node the message is about: recorded on the input, the turn joins its conversation. */
  readonly node?: string
}

/** The upstream model and the agent's tools as a turn's driver. */
export const agentDriver = (sessionId: string) =>
  Effect.gen(function* () {
    const client = yield* ModelClient
    const engine = yield* TurnEngine
    const context = yield* Effect.context<Effect.Effect.Context<ReturnType<typeof runTool>>>()
    const driver: Driver<UpstreamError> = {
      model: (compiled, step) =>
        Effect.gen(function* () {
          const request = compiled.format === "openai" ? compiled.request : { messages: [] }
          let done: Extract<CompletionEvent, { _tag: "Done" }> | undefined
          // The tools the compile chose for this step (on demand, counted in its budget).
          yield* client
            .complete({
              model: step.model.name,
              messages: request.messages,
              ...(request.tools === undefined ? {} : { tools: request.tools })
            })
            .pipe(
              Stream.runForEach((event) =>
                event._tag === "TextDelta"
                  ? step.emit({ type: "text-delta", text: event.text })
                  : Effect.sync(() => {
                      done = event
                    })
              )
            )
          return {
            text: done?.text ?? "",
            toolCalls: done?.toolCalls ?? [],
            ...(done?.usage === undefined ? {} : { usage: done.usage })
          }
        }),
      runTool: (call, step) =>
        Effect.flatMap(engine.tracker(sessionId), (tracker) =>
          runTool(sessionId, call.name, call.arguments, tracker, {
            allowControlFiles: step.manifest.agent.writeControlFiles
          })
        ).pipe(Effect.provide(context))
    }
    return driver
  })

/**
 * The turn as a stream of events; a failure of the turn is its last event (`error`), never a broken
 * stream. Only a session that takes no turns fails the stream (before any event).
 */
export const chat = (
  input: ChatInput,
  options: AgentOptions
): Stream.Stream<
  ChatEvent,
  SessionNotActive,
  TurnEngine | ModelClient | Effect.Effect.Context<ReturnType<typeof runTool>>
> =>
  Stream.unwrapScoped(
    Effect.gen(function* () {
      const queue = yield* Queue.unbounded<ChatEvent | SessionNotActive | null>()
      const parts = createPartAccumulator()
      const emit = (event: TurnEvent) => {
        pushChatEvent(parts, event)
        const out: ChatEvent = event.type === "done" ? { ...event, parts: parts.getParts() } : event
        return Queue.offer(queue, out).pipe(Effect.asVoid)
      }
      const engine = yield* TurnEngine
      const driver = yield* agentDriver(input.sessionId)
      yield* engine
        .turn(
          {
            sessionId: input.sessionId,
            input: input.message,
            ...(input.model === undefined ? {} : { model: input.model }),
            ...(input.idempotencyKey === undefined ? {} : { idempotencyKey: input.idempotencyKey }),
            ...(input.references === undefined ? {} : { references: input.references }),
            ...(input.node === undefined ? {} : { node: input.node })
          },
          driver,
          {
            defaultModel: options.defaultModel,
            maxSteps: options.maxSteps,
            format: "openai",
            tools: agentTools,
            emit
          }
        )
        .pipe(
          Effect.catchTag("SessionNotActive", (e) => Queue.offer(queue, e)),
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
      const events = Stream.fromQueue(queue).pipe(
        Stream.takeWhile((e): e is ChatEvent | SessionNotActive => e !== null),
        Stream.mapEffect((e) => ("_tag" in e ? Effect.fail(e) : Effect.succeed(e)))
      )
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
