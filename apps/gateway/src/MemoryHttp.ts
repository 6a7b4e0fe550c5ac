/**
 * The memory levels' handlers (`@ctxo/api/MemoryApi`): decode, call `@ctxo/agent/Memory`, encode.
 * An entry's level is the prefix of its id (`L2:...`); a session's endpoints take L1 and L2, the
 * root's L3 and L4, and anything else is a 404 naming the entry.
 */
import { Memory, MemoryEntryNotFound } from "@ctxo/agent/Memory"
import { SessionEvents } from "@ctxo/agent/SessionEvents"
import { Api } from "@ctxo/api/Api"
import { Store } from "@ctxo/store/Store"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { toApiError } from "./ErrorMapping.ts"

const wire = Effect.mapError(toApiError)

/** The level an entry id names, when it is one of `allowed`. */
const levelOf = <L extends string>(id: string, allowed: ReadonlyArray<L>): L | undefined =>
  allowed.find((l) => id.startsWith(`${l}:`))

const options = (params: {
  readonly expired?: "true" | "false" | undefined
  readonly deleted?: "true" | "false" | undefined
}) => ({
  includeExpired: params.expired === "true",
  includeDeleted: params.deleted === "true"
})

const sessionLevel = (sessionId: string, entryId: string) =>
  Effect.gen(function* () {
    yield* (yield* Store).getSession(sessionId)
    const level = levelOf(entryId, ["L1", "L2"] as const)
    if (level === undefined)
      return yield* new MemoryEntryNotFound({ level: "L1 or L2", id: entryId, where: `session ${sessionId}` })
    return level
  })

const globalLevel = (entryId: string) => {
  const level = levelOf(entryId, ["L3", "L4"] as const)
  return level === undefined
    ? Effect.fail(new MemoryEntryNotFound({ level: "L3 or L4", id: entryId, where: "the data root" }))
    : Effect.succeed(level)
}

export const MemoryLive = HttpApiBuilder.group(Api, "memory", (handlers) =>
  handlers
    .handle("session", ({ path, urlParams }) =>
      Effect.gen(function* () {
        yield* (yield* Store).getSession(path.id)
        const entries = yield* (yield* Memory).session(path.id, urlParams.level, options(urlParams))
        return { level: urlParams.level, entries }
      }).pipe(wire)
    )
    .handle("pinSession", ({ path, payload }) =>
      Effect.gen(function* () {
        const level = yield* sessionLevel(path.id, path.entryId)
        return yield* (yield* Memory).pin(level, path.entryId, payload.pinned ?? true, path.id)
      }).pipe(wire)
    )
    .handle("deleteSession", ({ path }) =>
      Effect.gen(function* () {
        const level = yield* sessionLevel(path.id, path.entryId)
        yield* (yield* Memory).remove(level, path.entryId, path.id)
      }).pipe(wire)
    )
    .handle("global", ({ urlParams }) =>
      Effect.gen(function* () {
        const entries = yield* (yield* Memory).global(urlParams.level, options(urlParams))
        return { level: urlParams.level, entries }
      }).pipe(wire)
    )
    .handle("pinGlobal", ({ path, payload }) =>
      Effect.gen(function* () {
        const level = yield* globalLevel(path.entryId)
        return yield* (yield* Memory).pin(level, path.entryId, payload.pinned ?? true)
      }).pipe(wire)
    )
    .handle("deleteGlobal", ({ path }) =>
      Effect.gen(function* () {
        const level = yield* globalLevel(path.entryId)
        yield* (yield* Memory).remove(level, path.entryId)
      }).pipe(wire)
    )
    .handle("persist", () =>
      Effect.gen(function* () {
        const scope = yield* (yield* Store).scope
        yield* (yield* SessionEvents).publish({ _tag: "MemoryPersistRequested", scope })
        return { requested: true as const }
      })
    )
)
