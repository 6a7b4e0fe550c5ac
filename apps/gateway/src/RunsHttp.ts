/**
 * Plan-execute-reflect runs' handlers (`@ctxo/api/RunsApi`): decode, call `@ctxo/agent/RunStream`
 * and the store, encode. A run streams like a chat (`EventStream`).
 */
import { runFrame, runStream } from "@ctxo/agent/RunStream"
import { Api } from "@ctxo/api/Api"
import { RunRequest } from "@ctxo/api/RunsApi"
import { Store } from "@ctxo/store/Store"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Deferred, Effect, Stream } from "effect"
import { toApiError } from "./ErrorMapping.ts"
import { decodeBody, eventStreamResponse } from "./EventStream.ts"
import { GatewayConfig } from "./GatewayConfig.ts"
import { Shutdown } from "./Shutdown.ts"

const wire = Effect.mapError(toApiError)

/** One run as Server-Sent Events. */
const start = (path: { readonly id: string }) =>
  Effect.gen(function* () {
    const payload = yield* decodeBody(RunRequest)
    yield* (yield* Store).getSession(path.id).pipe(wire)
    const context =
      yield* Effect.context<
        Effect.Effect.Context<
          ReturnType<typeof runStream> extends Stream.Stream<infer _A, infer _E, infer R>
            ? Effect.Effect<void, never, R>
            : never
        >
      >()
    const config = yield* GatewayConfig
    const shutdown = yield* Shutdown
    const events = runStream(
      {
        sessionId: path.id,
        goal: payload.goal,
        ...(payload.model === undefined ? {} : { model: payload.model }),
        ...(payload.idempotencyKey === undefined ? {} : { idempotencyKey: payload.idempotencyKey })
      },
      {
        defaultModel: config.model,
        limits: config.runLimits,
        maxToolSteps: config.maxSteps,
        stop: Deferred.await(shutdown)
      }
    ).pipe(Stream.provideContext(context))
    return yield* eventStreamResponse(events, runFrame)
  })

export const RunsLive = HttpApiBuilder.group(Api, "runs", (handlers) =>
  handlers
    .handleRaw("start", ({ path }) => start(path))
    .handle("list", ({ path }) =>
      Effect.gen(function* () {
        const store = yield* Store
        const ids = yield* store.listRuns(path.id)
        const states = yield* Effect.forEach(ids, (id) => store.readRun(path.id, id))
        return {
          runs: states
            .map((s) => ({
              runId: s.runId,
              goal: s.goal,
              phase: s.phase,
              isCompleted: s.isCompleted,
              reflectionCount: s.reflectionCount,
              steps: Object.keys(s.specialistResults).length,
              updatedAt: s.updatedAt,
              createdAt: s.createdAt
            }))
            .sort((a, b) => a.createdAt.localeCompare(b.createdAt))
            .map(({ createdAt: _created, ...summary }) => summary)
        }
      }).pipe(wire)
    )
    .handle("get", ({ path }) => Effect.flatMap(Store, (s) => s.readRun(path.id, path.runId)).pipe(wire))
)
