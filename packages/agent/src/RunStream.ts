/**
 * A plan-execute-reflect run (`Orchestrator.run`) driven by the upstream model, as a stream of
 * events (`POST /api/sessions/{id}/runs`, `ctxo run`): the orchestrator's roles ask the upstream
 * (the answerer's words stream as `text-delta`), and specialists are the agent of a chat (the
 * upstream model and the agent's tools) on their child sessions.
 *
 * Like a chat: a failure of the run is its last event (`error`), never a broken stream; only a
 * session that takes no turns fails the stream before its first event (`SessionNotActive`); a
 * client that goes away interrupts the run between whole steps, and the same idempotency key
 * resumes it.
 */
import { Effect, Queue, Stream } from "effect"
import { agentDriver } from "./Agent.ts"
import type { SessionNotActive } from "./Lifecycle.ts"
import { type CompletionEvent, ModelClient, type UpstreamError } from "./ModelClient.ts"
import { type RunEvent, type RunModel, type RunOptions, type RunRequest, run } from "./Orchestrator.ts"
import { agentTools, type runTool } from "./Tools.ts"
import type { TurnEngine } from "./TurnEngine.ts"

/** The upstream model as a run's model. */
export const liveRunModel = (
  emit: (event: RunEvent) => Effect.Effect<void>
): Effect.Effect<
  RunModel<UpstreamError, never>,
  never,
  ModelClient | TurnEngine | Effect.Effect.Context<ReturnType<typeof runTool>>
> =>
  Effect.gen(function* () {
    const client = yield* ModelClient
    const context = yield* Effect.context<
      ModelClient | TurnEngine | Effect.Effect.Context<ReturnType<typeof runTool>>
    >()
    return {
      ask: (role, compiled, step) =>
        Effect.gen(function* () {
          const request = compiled.format === "openai" ? compiled.request : { messages: [] }
          let done: Extract<CompletionEvent, { _tag: "Done" }> | undefined
          yield* client.complete({ model: step.model.name, messages: request.messages }).pipe(
            Stream.runForEach((event) =>
              event._tag === "TextDelta"
                ? role === "answerer"
                  ? emit({ type: "text-delta", text: event.text })
                  : Effect.void
                : Effect.sync(() => {
                    done = event
                  })
            )
          )
          return { text: done?.text ?? "", ...(done?.usage === undefined ? {} : { usage: done.usage }) }
        }),
      specialist: ({ childSession }) => agentDriver(childSession).pipe(Effect.provide(context))
    }
  })

export interface RunStreamOptions extends Omit<RunOptions, "emit" | "tools"> {
  /** When this completes, the run stops and its stream ends with a `Shutdown` error event. */
  readonly stop?: Effect.Effect<void>
}

/**
 * The run as a stream of events; a failure of the run is its last event (`error`). Only a session
 * that takes no turns fails the stream (before any event).
 */
export const runStream = (
  request: RunRequest,
  options: RunStreamOptions
): Stream.Stream<
  RunEvent,
  SessionNotActive,
  TurnEngine | ModelClient | Effect.Effect.Context<ReturnType<typeof runTool>>
> =>
  Stream.unwrapScoped(
    Effect.gen(function* () {
      const queue = yield* Queue.unbounded<RunEvent | SessionNotActive | null>()
      const emit = (event: RunEvent) => Queue.offer(queue, event).pipe(Effect.asVoid)
      const model = yield* liveRunModel(emit)
      yield* run(request, model, { ...options, tools: agentTools, emit }).pipe(
        Effect.catchTag("SessionNotActive", (e) => Queue.offer(queue, e)),
        Effect.catchAll((e) =>
          emit({
            type: "error",
            tag: typeof e === "object" && e !== null && "_tag" in e ? String(e._tag) : "Error",
            message: e instanceof Error ? e.message : String(e)
          })
        ),
        Effect.catchAllDefect((defect) => emit({ type: "error", tag: "Defect", message: String(defect) })),
        Effect.ensuring(Queue.offer(queue, null)),
        Effect.forkScoped
      )
      const events = Stream.fromQueue(queue).pipe(
        Stream.takeWhile((e): e is RunEvent | SessionNotActive => e !== null),
        Stream.mapEffect((e) => ("_tag" in e ? Effect.fail(e) : Effect.succeed(e)))
      )
      if (options.stop === undefined) return events
      const shutdown = Stream.fromEffect(options.stop).pipe(
        Stream.as<RunEvent>({
          type: "error",
          tag: "Shutdown",
          message:
            "The gateway is shutting down; start the run again with the same idempotency key to resume it."
        })
      )
      return Stream.merge(events, shutdown, { haltStrategy: "either" })
    })
  )

/** One event as a Server-Sent Events frame. */
export const runFrame = (event: RunEvent): string =>
  `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`
