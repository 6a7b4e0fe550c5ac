/**
 * Where a session's history lives. `modify` is the one way to change it: reads, applies a pure
 * function, writes, serialized per session so concurrent writers never lose each other's
 * messages. Two layers:
 * - `layerMemory`: for tests and replay;
 * - `layerFile(root)`: `<root>/<sessionId>/messages.json`, written atomically (temporary file,
 *   fsync, rename), and full tool results under `<root>/<sessionId>/tool-results/<callId>.json`.
 */

import { writeFileAtomic } from "@ctxo/store/Atomic"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Context, Effect, Layer, Option, Schema } from "effect"
import type { HistoryError } from "./HistoryErrors.ts"
import { HistoryCorrupt, HistoryIOError, InvalidSessionId } from "./HistoryErrors.ts"
import type { HistoryDocument } from "./Message.ts"
import { emptyHistory, HistoryDocument as HistoryDocumentSchema } from "./Message.ts"
import { fullResultPath } from "./ToolResultCompressor.ts"

export interface Service {
  readonly load: (sessionId: string) => Effect.Effect<HistoryDocument, HistoryError>
  /** Applies `f` to the current document and stores the result; returns what `f` returned. */
  readonly modify: <A, E = never>(
    sessionId: string,
    f: (doc: HistoryDocument) => Effect.Effect<readonly [A, HistoryDocument], E>
  ) => Effect.Effect<A, HistoryError | E>
  /** Keeps the full result of a tool call; returns its path relative to the session directory. */
  readonly saveFullResult: (
    sessionId: string,
    callId: string,
    result: unknown
  ) => Effect.Effect<string, HistoryError>
  readonly readFullResult: (sessionId: string, callId: string) => Effect.Effect<unknown, HistoryError>
}

export class HistoryStore extends Context.Tag("@ctxo/history/HistoryStore")<HistoryStore, Service>() {}

const SESSION_ID = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/
export const validateSessionId = (sessionId: string): Effect.Effect<string, InvalidSessionId> =>
  SESSION_ID.test(sessionId) && sessionId !== "." && sessionId !== ".."
    ? Effect.succeed(sessionId)
    : Effect.fail(new InvalidSessionId({ sessionId }))

/** One lock per session: writes to one session are serialized, other sessions are not blocked. */
const makeLocks = Effect.sync(() => {
  const locks = new Map<string, Effect.Semaphore>()
  return (sessionId: string) => {
    let lock = locks.get(sessionId)
    if (lock === undefined) {
      lock = Effect.unsafeMakeSemaphore(1)
      locks.set(sessionId, lock)
    }
    return lock
  }
})

export const makeMemory = Effect.gen(function* () {
  const docs = new Map<string, HistoryDocument>()
  const results = new Map<string, unknown>()
  const lockFor = yield* makeLocks
  const service: Service = {
    // Read when run, not when the effect is made: a `load` effect kept and run again sees new writes.
    load: (sessionId) =>
      validateSessionId(sessionId).pipe(Effect.map(() => docs.get(sessionId) ?? emptyHistory)),
    modify: (sessionId, f) =>
      Effect.gen(function* () {
        yield* validateSessionId(sessionId)
        const [value, next] = yield* f(docs.get(sessionId) ?? emptyHistory)
        docs.set(sessionId, next)
        return value
      }).pipe(lockFor(sessionId).withPermits(1)),
    saveFullResult: (sessionId, callId, result) =>
      validateSessionId(sessionId).pipe(
        Effect.map(() => {
          const path = fullResultPath(callId)
          results.set(`${sessionId}/${path}`, result)
          return path
        })
      ),
    readFullResult: (sessionId, callId) =>
      Effect.sync(() => results.get(`${sessionId}/${fullResultPath(callId)}`))
  }
  return service
})

export const layerMemory: Layer.Layer<HistoryStore> = Layer.effect(HistoryStore, makeMemory)

/** Atomic writes (temp file, fsync, rename) live in the store package; re-exported for callers. */
export { writeFileAtomic } from "@ctxo/store/Atomic"

const decodeDocument = Schema.decodeUnknownEither(Schema.parseJson(HistoryDocumentSchema))

export const makeFile = (root: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const lockFor = yield* makeLocks
    const io = (file: string, operation: string) => (error: { message: string }) =>
      new HistoryIOError({ file, operation, reason: error.message })

    const writeAtomic = (file: string, text: string) =>
      writeFileAtomic(file, text).pipe(
        Effect.provideService(FileSystem.FileSystem, fs),
        Effect.provideService(Path.Path, path),
        Effect.mapError(io(file, "write"))
      )

    const fileOf = (sessionId: string) => path.join(root, sessionId, "messages.json")

    // The last document read or written per session, with the file's mtime and size then: while
    // the file is unchanged it is not parsed again. A change made by hand is seen and re-read.
    const cache = new Map<string, { readonly doc: HistoryDocument; readonly stamp: string }>()
    const stampOf = (file: string) =>
      fs.stat(file).pipe(
        Effect.map((info) => `${Option.getOrElse(info.mtime, () => new Date(0)).getTime()}:${info.size}`),
        Effect.catchTag("SystemError", (error) =>
          error.reason === "NotFound" ? Effect.succeed(undefined) : Effect.fail(error)
        ),
        Effect.mapError(io(file, "read"))
      )

    const read = (sessionId: string) =>
      Effect.gen(function* () {
        const file = fileOf(sessionId)
        const stamp = yield* stampOf(file)
        if (stamp === undefined) return emptyHistory
        const cached = cache.get(sessionId)
        if (cached !== undefined && cached.stamp === stamp) return cached.doc
        const text = yield* fs.readFileString(file).pipe(Effect.mapError(io(file, "read")))
        const doc = yield* decodeDocument(text).pipe(
          Effect.mapError((error) => new HistoryCorrupt({ file, reason: error.message }))
        )
        cache.set(sessionId, { doc, stamp })
        return doc
      })

    const service: Service = {
      load: (sessionId) => validateSessionId(sessionId).pipe(Effect.zipRight(read(sessionId))),
      modify: (sessionId, f) =>
        Effect.gen(function* () {
          yield* validateSessionId(sessionId)
          const [value, next] = yield* f(yield* read(sessionId))
          const file = fileOf(sessionId)
          yield* writeAtomic(file, `${JSON.stringify(next, null, 2)}\n`)
          const stamp = yield* stampOf(file)
          if (stamp === undefined) cache.delete(sessionId)
          else cache.set(sessionId, { doc: next, stamp })
          return value
        }).pipe(lockFor(sessionId).withPermits(1)),
      saveFullResult: (sessionId, callId, result) =>
        Effect.gen(function* () {
          yield* validateSessionId(sessionId)
          const relative = fullResultPath(callId)
          yield* writeAtomic(path.join(root, sessionId, relative), `${JSON.stringify(result, null, 2)}\n`)
          return relative
        }),
      readFullResult: (sessionId, callId) =>
        Effect.gen(function* () {
          yield* validateSessionId(sessionId)
          const file = path.join(root, sessionId, fullResultPath(callId))
          const text = yield* fs.readFileString(file).pipe(Effect.mapError(io(file, "read")))
          return yield* Effect.try({
            try: () => JSON.parse(text) as unknown,
            catch: (e) => new HistoryCorrupt({ file, reason: String(e) })
          })
        })
    }
    return service
  })

export const layerFile = (
  root: string
): Layer.Layer<HistoryStore, never, FileSystem.FileSystem | Path.Path> =>
  Layer.effect(HistoryStore, makeFile(root))
