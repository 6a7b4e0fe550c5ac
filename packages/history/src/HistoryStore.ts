/**
 * Where a session's history lives. `modify` is the one way to change it: reads, applies a pure
 * function, writes, serialized per session so concurrent writers never lose each other's
 * messages. Two layers:
 * - `layerMemory`: for tests and replay;
 * - `layerStore` / `fromStore(store)`: the data root's store (`messages.json` with its journal
 *   `messages.journal`, and `tool-results/<callId>.json` in the session's directory, the session's
 *   lock): a change is one journal record, the difference from the document before (documents are
 *   immutable: the messages before the first one that is not the same object are kept), on disk
 *   before `modify` returns; `layerFile(root)` is the same over a store of `root`, its journals
 *   folded into messages.json when the layer is released.
 */

import { diffHistory, type HistoryPatch } from "@ctxo/store/HistoryJournal"
import { cleanSessionId, HISTORY_FILE } from "@ctxo/store/Paths"
import * as SessionCache from "@ctxo/store/SessionCache"
import * as Store from "@ctxo/store/Store"
import type { StoreError } from "@ctxo/store/StoreErrors"
import { Context, Effect, Either, Layer, type Scope } from "effect"
import type { HistoryError } from "./HistoryErrors.ts"
import { HistoryCorrupt, HistoryIOError, InvalidSessionId } from "./HistoryErrors.ts"
import { decodeHistoryJson } from "./HistoryFormat.ts"
import type { HistoryDocument } from "./Message.ts"
import { emptyHistory } from "./Message.ts"
import { fullResultPath } from "./ToolResultCompressor.ts"

export interface Service {
  readonly load: (sessionId: string) => Effect.Effect<HistoryDocument, HistoryError>
  /**
   * Applies `f` to the current document and stores the result; returns what `f` returned. A
   * document and everything in it (a tool's `data` and `input` too) are never changed once made:
   * the store holds the same objects and writes them out later (`f` makes new ones for what it
   * changes, as `diffHistory` expects).
   */
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

/** The store's session-id rule, as this package's error. */
export const validateSessionId = (sessionId: string): Effect.Effect<string, InvalidSessionId> =>
  Either.isRight(cleanSessionId(sessionId))
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

/** A store's error on a session's history as history's own (the file and the operation named). */
export const fromStoreError =
  (sessionId: string, operation: string) =>
  (e: StoreError): HistoryError =>
    e._tag === "PathRefused" && e.path === sessionId
      ? new InvalidSessionId({ sessionId })
      : e._tag === "SessionNotFound"
        ? e
        : e._tag === "PathRefused"
          ? // messages.json or tool-results/ made a link out of the session: named, never followed.
            new HistoryCorrupt({ file: `${sessionId}/${e.path}`, reason: e.reason })
          : e._tag === "CorruptFile"
            ? new HistoryCorrupt({ file: e.path, reason: e.reason })
            : e._tag === "HistoryJournalCorrupt"
              ? new HistoryCorrupt({ file: e.path, reason: `line ${e.line}: ${e.reason}` })
              : new HistoryIOError({ file: `${sessionId}/${HISTORY_FILE}`, operation, reason: e.message })

/**
 * History kept by the data root's store: `messages.json` with its journal and `tool-results/`
 * through the store's checked writes and its per-session lock (the one the files API, deletion and
 * turns take), so a deleted session's history is never written back.
 */
export const fromStore = (store: Store.Service): Service => {
  const fileOf = (sessionId: string) => `${sessionId}/${HISTORY_FILE}`
  /**
   * The last document per session with the stored JSON it came from (the store hands back the same
   * object while the files are unchanged): an unchanged history is not decoded again. `exact`: the
   * stored JSON is a v1 document whose messages are the document's, one for one, so a change can
   * keep its first messages; otherwise (none yet, a plain array of chat messages) the first change
   * writes the whole document.
   */
  const cache = store.cache.holder<{
    readonly json: unknown
    readonly doc: HistoryDocument
    readonly exact: boolean
  }>("decoded history")
  const keyOf = (sessionId: string) => SessionCache.keyOf(store.root, sessionId)
  const remember = (sessionId: string, entry: { json: unknown; doc: HistoryDocument; exact: boolean }) => {
    cache.set(keyOf(sessionId), entry)
    return entry
  }
  const decoded = (sessionId: string, json: unknown) => {
    if (json === undefined) return Effect.succeed({ json, doc: emptyHistory, exact: false })
    const cached = cache.get(keyOf(sessionId))
    if (cached !== undefined && cached.json === json) return Effect.succeed(cached)
    // The v1 document, or the plain array of chat messages (written back as v1 on the next change).
    return Either.match(decodeHistoryJson(json, fileOf(sessionId)), {
      onLeft: Effect.fail,
      onRight: (doc) => Effect.succeed(remember(sessionId, { json, doc, exact: !Array.isArray(json) }))
    })
  }
  const check = (sessionId: string) => validateSessionId(sessionId)
  /** `modify`'s change of the stored JSON: the document `f` makes, as a patch (`f`'s result beside it). */
  function* changed<A, E>(
    sessionId: string,
    json: unknown,
    f: (doc: HistoryDocument) => Effect.Effect<readonly [A, HistoryDocument], E>,
    into: { after?: HistoryDocument }
  ) {
    const current = yield* decoded(sessionId, json)
    const [value, next] = yield* f(current.doc)
    into.after = next
    return [value, diffHistory(current.exact ? current.doc : undefined, next)] as const
  }
  function* modified<A, E>(
    sessionId: string,
    f: (doc: HistoryDocument) => Effect.Effect<readonly [A, HistoryDocument], E>
  ) {
    yield* check(sessionId)
    const into: { after?: HistoryDocument } = {}
    // Nothing is written when reading or `f` fails; its error is given back as it is.
    const change = (
      json: unknown
    ): Effect.Effect<readonly [Either.Either<A, HistoryError | E>, HistoryPatch | undefined]> =>
      Effect.gen(() => changed(sessionId, json, f, into)).pipe(
        Effect.match({
          onFailure: (e) => [Either.left(e), undefined] as const,
          onSuccess: ([value, patch]) => [Either.right(value), patch] as const
        })
      )
    const [outcome, json] = yield* store
      .updateHistory(sessionId, change)
      .pipe(Effect.mapError(fromStoreError(sessionId, "write")))
    const value = yield* outcome
    if (into.after !== undefined) remember(sessionId, { json, doc: into.after, exact: true })
    return value
  }
  const modify = <A, E>(
    sessionId: string,
    f: (doc: HistoryDocument) => Effect.Effect<readonly [A, HistoryDocument], E>
  ): Effect.Effect<A, HistoryError | E> => Effect.gen(() => modified(sessionId, f))
  return {
    load: Effect.fnUntraced(function* (sessionId: string) {
      yield* check(sessionId)
      const json = yield* store
        .readHistoryJson(sessionId)
        .pipe(Effect.mapError(fromStoreError(sessionId, "read")))
      return (yield* decoded(sessionId, json)).doc
    }),
    modify,
    saveFullResult: (sessionId, callId, result) =>
      Effect.zipRight(
        check(sessionId),
        store
          .writeToolResult(sessionId, callId, `${JSON.stringify(result, null, 2)}\n`)
          .pipe(Effect.mapError(fromStoreError(sessionId, "write")))
      ),
    readFullResult: (sessionId, callId) =>
      Effect.gen(function* () {
        yield* check(sessionId)
        const file = `${sessionId}/${fullResultPath(callId)}`
        const text = yield* store
          .readToolResult(sessionId, callId)
          .pipe(Effect.mapError(fromStoreError(sessionId, "read")))
        if (text === undefined)
          return yield* new HistoryIOError({ file, operation: "read", reason: "the file does not exist" })
        return yield* Effect.try({
          try: () => JSON.parse(text) as unknown,
          catch: () => new HistoryCorrupt({ file, reason: "it is not JSON" })
        })
      })
  }
}

/**
 * History in `<root>/<sessionId>/messages.json` (and its journal), through a store of that root
 * whose journals are folded into messages.json when the scope closes.
 */
export const makeFile = (
  root: string,
  options?: Store.StoreOptions
): Effect.Effect<Service, never, Scope.Scope> => Effect.map(Store.makeScoped(root, options), fromStore)

export const layerFile = (root: string, options?: Store.StoreOptions): Layer.Layer<HistoryStore> =>
  Layer.scoped(HistoryStore, makeFile(root, options))

/** History through the data root's store. */
export const layerStore: Layer.Layer<HistoryStore, never, Store.Store> = Layer.effect(
  HistoryStore,
  Effect.map(Store.Store, fromStore)
)
