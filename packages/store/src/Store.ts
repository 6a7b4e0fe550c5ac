/**
 * The data root on disk, and the only module that touches it (layout and naming rules in
 * `Paths.ts`):
 *
 *   <root>/profile.md, system-prompt.md      global files (any regular file at the top)
 *   <root>/sessions.json                     thin records { id, concept, createdAt, state,
 *                                            stateChangedAt, metadata } (`Records.ts`; records
 *                                            without the last three read as active, no metadata)
 *   <root>/distributions.json                the latest task distributions (`Distribution`)
 *   <root>/memory.json                       agent-level (L3) and global (L4) memory (`MemoryEntry`)
 *   <root>/knowledge-index.json              the knowledge index, derived from the sessions' files
 *   <root>/<sessionId>/...                   context-config.json, messages.json and its journal
 *                                            messages.journal, tool-results/, tasks.json (its
 *                                            tasks, `Task`), memory.json (its L2 memory and L1
 *                                            overrides, `MemoryEntry`), any file
 *
 * One path rule, one session-id rule, one symlink rule, one lock per session and one file cache:
 * - Files are opened first and checked where the opened file really is (`internal/safeFs.ts`), so
 *   a symlink swapped in between a check and the open is never followed out. A session may touch
 *   its own directory and the global files, never another session's folder, `sessions.json` or
 *   tenant folders; a symlink is followed only when the file it leads to is one of those.
 * - Writes are atomic (temporary file, fsync, rename) and never recreate a deleted session's
 *   directory. A history change is one record appended to the session's journal instead, on disk
 *   (fdatasync) before it is acknowledged, and folded into messages.json later
 *   (`internal/journalFiles.ts`; the format is `HistoryJournal.ts`). Every write of a session (files, history, tool results) and its deletion take the
 *   session's lock; a turn holds it for the whole turn (`withSessionLock` is re-entrant within
 *   the fiber that holds it, so the turn's own writes pass).
 * - Reads are cached by device, inode, modification time and size: an unchanged file is one
 *   `stat`, and a changed or swapped one is read again through the checks.
 * - The indexes (sessions.json, distributions.json, memory.json) are the store's alone: no session reads them,
 *   a session id cannot take their names, and each is rewritten whole under its own lock (a
 *   session's record under the session's lock first, then the index's).
 * A version is the first 16 hex digits of the SHA-256 of the content; a write may carry the
 * version it read (`ifMatch`) and fails with VersionConflict when the file changed since.
 */
import type { Dirent } from "node:fs"
import { cp, lstat, mkdir, readdir, realpath, rm, stat } from "node:fs/promises"
import { basename, dirname, join, relative, resolve, sep } from "node:path"
import type { Scope as EffectScope } from "effect"
import { Context, Effect, Either, FiberRef, HashSet, Layer, Schema } from "effect"
import type { FileContent, FileInfo } from "./FileRecords.ts"
import type { HistoryPatch } from "./HistoryJournal.ts"
import {
  contentOf,
  nextText,
  readRefusal,
  versionCheck,
  versionOf,
  writeRefusal
} from "./internal/fileEdits.ts"
import { type JournalOptions, makeJournalFiles } from "./internal/journalFiles.ts"
import {
  dirStampNow,
  errnoOf,
  isDirectoryNow,
  isInside,
  OutsideError,
  readInside,
  stampNow,
  unlinkInside,
  writeInside
} from "./internal/safeFs.ts"
import { timedWait } from "./LockSpan.ts"
import {
  checkPath,
  checkSessionId,
  cleanGlobalPath,
  DISTRIBUTIONS_FILE,
  GLOBAL_MEMORY_FILE,
  HISTORY_FILE,
  HISTORY_JOURNAL,
  INDEX_FILE,
  isHistoryFile,
  isRootIndexFile,
  isTempFile,
  KNOWLEDGE_INDEX_FILE,
  MAX_DISTRIBUTIONS,
  MEMORY_FILE,
  RUN_ID,
  RUNS_DIR,
  runPath,
  TASKS_FILE,
  toolResultPath
} from "./Paths.ts"
import {
  type Distribution,
  decodeDistributions,
  decodeMemory,
  decodeTasks,
  jsonText,
  type MemoryEntry,
  SessionIndex,
  type SessionRecord,
  type SessionState,
  type Task
} from "./Records.ts"
import { decodeRun, type EnhancedState } from "./Runs.ts"
import * as SessionCache from "./SessionCache.ts"
import {
  FileNotFound,
  PathRefused,
  RunNotFound,
  SessionExists,
  SessionNotFound,
  type StoreError,
  StoreIOError
} from "./StoreErrors.ts"

export { FileContent, FileInfo } from "./FileRecords.ts"
export { checkPath, checkSessionId, HISTORY_FILE, MANIFEST_FILE, SESSION_ID } from "./Paths.ts"
export { Distribution, MemoryEntry, SessionRecord, Task } from "./Records.ts"

export interface WriteOptions {
  /** The version the writer read: the write fails when the file changed since ("" = must not exist). */
  readonly ifMatch?: string
  /** Replace only lines startLine..endLine (1-based, inclusive) with the content. */
  readonly startLine?: number
  readonly endLine?: number
  /**
   * Who writes: `model` (the agent's tools) may not write the session's control files
   * (context-config.json) unless `allowControlFiles`; nobody but the history recorder writes
   * messages.json or tool-results/.
   */
  readonly actor?: "user" | "model"
  readonly allowControlFiles?: boolean
}

export type Scope = "global" | "session"

/** A change of a session's record; `stateChangedAt` follows a change of `state`. */
export interface SessionPatch {
  readonly concept?: string
  readonly state?: SessionState
  /** The whole new metadata (merging is the caller's). */
  readonly metadata?: Readonly<Record<string, string>>
}

export interface Service {
  readonly root: string
  /**
   * Which data root this request's sessions live in (the root's path; a gateway with tenants: the
   * tenant's). Per-session state kept beside the store is keyed by it, so two tenants' sessions of
   * the same id never share it.
   */
  readonly scope: Effect.Effect<string>
  /**
   * What is kept of the sessions between requests, in one budget of bytes (`SessionCache`): the
   * history parts built over this store (decoded histories, memory's turns, the turn engine's last
   * compiles) keep their values here, keyed by `scope`, beside the store's own: the process's cache
   * when the store was given one (a gateway's, shared by its tenants' stores), else the store's.
   */
  readonly cache: SessionCache.Service
  readonly listSessions: Effect.Effect<ReadonlyArray<SessionRecord>, StoreError>
  /** A new session, `active`, with its metadata (none by default). */
  readonly createSession: (input: {
    readonly id?: string
    readonly concept: string
    readonly metadata?: Readonly<Record<string, string>>
  }) => Effect.Effect<SessionRecord, StoreError>
  readonly getSession: (id: string) => Effect.Effect<SessionRecord, StoreError>
  /**
   * Changes a session's record and returns it, under the session's lock (so it waits for a
   * running turn; a caller holding the lock, checking the record first, decides atomically).
   */
  readonly updateSession: (id: string, patch: SessionPatch) => Effect.Effect<SessionRecord, StoreError>
  readonly deleteSession: (id: string) => Effect.Effect<void, StoreError>
  readonly listFiles: (sessionId: string) => Effect.Effect<ReadonlyArray<FileInfo>, StoreError>
  /** A session's file (or a global file with `sessionId` undefined), optionally a line range. */
  readonly readFile: (
    sessionId: string | undefined,
    path: string,
    range?: { readonly startLine?: number; readonly endLine?: number }
  ) => Effect.Effect<FileContent, StoreError>
  readonly writeFile: (
    sessionId: string,
    path: string,
    content: string,
    options?: WriteOptions
  ) => Effect.Effect<FileInfo, StoreError>
  readonly deleteFile: (sessionId: string, path: string, ifMatch?: string) => Effect.Effect<void, StoreError>
  /** Runs `effect` holding the session's lock (writes, history, deletion and turns share it). */
  readonly withSessionLock: <A, E, R>(
    sessionId: string,
    effect: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E, R>

  // --- reads for the compiler: undefined when the file does not exist
  /** Whether the session has a directory in the data root. */
  readonly hasSession: (sessionId: string) => Effect.Effect<boolean, StoreError>
  /** A file's text (global: the data root's top; session: the session and the global files). */
  readonly read: (
    scope: Scope,
    sessionId: string,
    path: string
  ) => Effect.Effect<string | undefined, StoreError>
  readonly readMany: (
    scope: Scope,
    sessionId: string,
    paths: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<string | undefined>, StoreError>
  /** Files of the scope, recursively, relative, sorted (global: the top-level global files). */
  readonly list: (scope: Scope, sessionId: string) => Effect.Effect<ReadonlyArray<string>, StoreError>

  // --- history: the recorder's files (the layout is the store's)
  /** messages.json's text, its journal folded in (undefined: no history). */
  readonly readHistory: (sessionId: string) => Effect.Effect<string | undefined, StoreError>
  /**
   * Replaces messages.json whole, atomically (its journal folded first); the session's directory
   * must exist (a deleted one stays gone).
   */
  readonly writeHistory: (sessionId: string, text: string) => Effect.Effect<void, StoreError>
  /**
   * The history as JSON: messages.json with its journal folded in, without the journal's
   * bookkeeping (`journalSeq`); undefined when the session has none. The same object while the
   * files are unchanged.
   */
  readonly readHistoryJson: (sessionId: string) => Effect.Effect<unknown, StoreError>
  /**
   * Changes the history under the session's lock: `f` gets what `readHistoryJson` gives and returns
   * a value and the change (undefined: none). On disk the change is one record appended to
   * messages.journal, on disk (fdatasync) before this returns (inside `HistorySync.deferSync`:
   * when its wait is run); the session must exist. Returns
   * `f`'s value and the JSON after the change.
   */
  readonly updateHistory: <A, E>(
    sessionId: string,
    f: (json: unknown) => Effect.Effect<readonly [A, HistoryPatch | undefined], E>
  ) => Effect.Effect<readonly [A, unknown], E | StoreError>
  /** Keeps a full tool result; returns its path relative to the session. */
  readonly writeToolResult: (
    sessionId: string,
    callId: string,
    text: string
  ) => Effect.Effect<string, StoreError>
  readonly readToolResult: (
    sessionId: string,
    callId: string
  ) => Effect.Effect<string | undefined, StoreError>

  // --- tasks and distributions: the task API's files (the layout is the store's)
  /** A session's tasks, oldest first (none when it has no tasks.json; CorruptFile when it does not decode). */
  readonly readTasks: (sessionId: string) => Effect.Effect<ReadonlyArray<Task>, StoreError>
  /** Writes tasks.json atomically under the session's lock; the session must exist. */
  readonly writeTasks: (sessionId: string, tasks: ReadonlyArray<Task>) => Effect.Effect<void, StoreError>
  /** The latest distributions (at most `MAX_DISTRIBUTIONS`), oldest first. */
  readonly listDistributions: Effect.Effect<ReadonlyArray<Distribution>, StoreError>
  /** Adds a distribution, or replaces the one with its id; the oldest beyond the bound are dropped. */
  readonly putDistribution: (distribution: Distribution) => Effect.Effect<void, StoreError>

  // --- memory (seed 003 levels; the model is `@ctxo/agent/Memory`)
  /** A session's memory entries (none when it has no memory.json). */
  readonly readMemory: (sessionId: string) => Effect.Effect<ReadonlyArray<MemoryEntry>, StoreError>
  /** Rewrites the session's memory.json with `update` of what is there, under the session's lock. */
  readonly updateMemory: (
    sessionId: string,
    update: (entries: ReadonlyArray<MemoryEntry>) => ReadonlyArray<MemoryEntry>
  ) => Effect.Effect<ReadonlyArray<MemoryEntry>, StoreError>
  /** The root's memory entries (L3 and L4). */
  readonly readGlobalMemory: Effect.Effect<ReadonlyArray<MemoryEntry>, StoreError>
  /** Rewrites the root's memory.json with `update` of what is there, under its own lock. */
  readonly updateGlobalMemory: (
    update: (entries: ReadonlyArray<MemoryEntry>) => ReadonlyArray<MemoryEntry>
  ) => Effect.Effect<ReadonlyArray<MemoryEntry>, StoreError>

  // --- plan-execute-reflect runs (`@ctxo/agent/Orchestrator`): `<session>/runs/<runId>.json`
  /** A run's state (`RunNotFound` when the session has no such run; CorruptFile when it does not decode). */
  readonly readRun: (sessionId: string, runId: string) => Effect.Effect<EnhancedState, StoreError>
  /**
   * Writes a run's state atomically. It takes no lock: the orchestrator writes while its turn holds
   * the session's lock (runs of a session are its turns, one at a time).
   */
  readonly writeRun: (state: EnhancedState) => Effect.Effect<void, StoreError>
  /** The session's run ids, sorted. */
  readonly listRuns: (sessionId: string) => Effect.Effect<ReadonlyArray<string>, StoreError>

  /** The saved knowledge index of the data root (derived data: the retrieval package's snapshot). */
  readonly readKnowledgeIndex: Effect.Effect<string | undefined, StoreError>
  readonly writeKnowledgeIndex: (text: string) => Effect.Effect<void, StoreError>

  /** Removes temporary files that interrupted writes left; the number removed. */
  readonly cleanTemporaryFiles: Effect.Effect<number, StoreError>
  /**
   * Folds every history journal this store knows of into its messages.json, after the folds under
   * way (the store's layer does it when released). Nothing is lost without it: a journal is read
   * as part of messages.json.
   */
  readonly flush: Effect.Effect<void>
}

export class Store extends Context.Tag("@ctxo/store/Store")<Store, Service>() {}

export { versionOf } from "./internal/fileEdits.ts"

/** The locks this fiber holds (store root + session), so a turn's own writes do not wait on it. */
const heldLocks = FiberRef.unsafeMake(HashSet.empty<string>())

const decodeIndex = Schema.decodeUnknownEither(SessionIndex)

/** A record with a patch applied at `now` (the state's time moves only when the state changes). */
export const patchRecord = (record: SessionRecord, patch: SessionPatch, now: string): SessionRecord => ({
  ...record,
  ...(patch.concept === undefined ? {} : { concept: patch.concept }),
  ...(patch.metadata === undefined ? {} : { metadata: { ...patch.metadata } }),
  ...(patch.state === undefined || patch.state === record.state
    ? {}
    : { state: patch.state, stateChangedAt: now })
})

/** The distributions with `distribution` added (or replacing its id), the newest `MAX_DISTRIBUTIONS`. */
export const withDistribution = (
  log: ReadonlyArray<Distribution>,
  distribution: Distribution
): ReadonlyArray<Distribution> => {
  const at = log.findIndex((d) => d.id === distribution.id)
  const next = at === -1 ? [...log, distribution] : log.map((d, i) => (i === at ? distribution : d))
  return next.slice(Math.max(0, next.length - MAX_DISTRIBUTIONS))
}

/** A new session's record. */
export const newRecord = (
  id: string,
  concept: string,
  metadata: Readonly<Record<string, string>> | undefined,
  now: string
): SessionRecord => ({
  id,
  concept,
  createdAt: now,
  state: "active",
  stateChangedAt: now,
  metadata: { ...metadata }
})

const fromEither = <A, E>(either: Either.Either<A, E>): Effect.Effect<A, E> =>
  Either.match(either, { onLeft: Effect.fail, onRight: Effect.succeed })

/** What a file read kept is: its text, or no file (`stamp` undefined), and where it was. */
interface KnownRead {
  readonly full: string
  readonly stamp: string | undefined
  readonly text: string | undefined
}
/** Bytes an entry takes besides its text (its path, stamp and the map's slot). */
const ENTRY_BYTES = 256
/** Files of one session whose reads are kept, at most (its least recently read leave first). */
const MAX_READS = 1024
/** A session's reads weigh their texts (one byte a character, as Node keeps most) and their entries. */
const weighRead = (r: KnownRead) => (r.text?.length ?? 0) + r.full.length + ENTRY_BYTES
const weighReads = (held: ReadonlyMap<string, KnownRead>) => {
  let n = 0
  for (const r of held.values()) n += weighRead(r)
  return n
}

/** Keeps at most `max` entries, dropping the oldest. */
const bounded = <K, V>(map: Map<K, V>, max: number) => {
  while (map.size > max) map.delete(map.keys().next().value as K)
}

/**
 * A store's `updateMemory` inside its session lock: the session checked, its memory.json's entries
 * through `update`, written back when they changed. The file store and PostgreSQL's store make one
 * each, over their own reads and file write (its generator made once, with the store).
 */
export const memoryUpdater = (ops: {
  readonly getSession: (sessionId: string) => Effect.Effect<unknown, StoreError>
  readonly readSessionMemory: (sessionId: string) => Effect.Effect<ReadonlyArray<MemoryEntry>, StoreError>
  readonly writeMemory: (sessionId: string, text: string) => Effect.Effect<unknown, StoreError>
}) =>
  Effect.fnUntraced(function* (
    sessionId: string,
    update: (entries: ReadonlyArray<MemoryEntry>) => ReadonlyArray<MemoryEntry>
  ) {
    yield* ops.getSession(sessionId)
    const before = yield* ops.readSessionMemory(sessionId)
    const after = update(before)
    if (after !== before) yield* ops.writeMemory(sessionId, jsonText(after))
    return after
  })

/**
 * One lock per session of a store, re-entrant within the fiber holding it (a lock span: the effect
 * given and what it runs), dropped when idle. `enter` runs first in each new span, once the lock is
 * held (the file store waits there for a fold of the session that the span before it left running).
 */
export const sessionLocks = (
  storeKey: string,
  enter: (sessionId: string) => Effect.Effect<void> = () => Effect.void
) => {
  const locks = new Map<string, { readonly semaphore: Effect.Semaphore; users: number }>()
  const keyOf = (sessionId: string) => `${storeKey}\u0000${sessionId}`
  const withLock = <A, E, R>(sessionId: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.flatMap(FiberRef.get(heldLocks), (held) => {
      const key = keyOf(sessionId)
      if (HashSet.has(held, key)) return effect
      return Effect.acquireUseRelease(
        Effect.sync(() => {
          let lock = locks.get(key)
          if (lock === undefined) {
            lock = { semaphore: Effect.unsafeMakeSemaphore(1), users: 0 }
            locks.set(key, lock)
          }
          lock.users++
          return lock
        }),
        (lock) =>
          timedWait(sessionId, (entered) =>
            lock.semaphore.withPermits(1)(
              Effect.zipRight(
                entered,
                Effect.zipRight(enter(sessionId), Effect.locally(effect, heldLocks, HashSet.add(held, key)))
              )
            )
          ),
        (lock) =>
          Effect.sync(() => {
            lock.users--
            if (lock.users === 0) locks.delete(key)
          })
      )
    })
  /** Whether a span holds the session's lock or waits for it. */
  const busy = (sessionId: string) => (locks.get(keyOf(sessionId))?.users ?? 0) > 0
  /**
   * The lock span the caller is in for the session (the same object for the span, but inside
   * another session's lock taken within it), or undefined when it does not hold the session's lock.
   */
  const span = (sessionId: string): Effect.Effect<object | undefined> =>
    Effect.map(FiberRef.get(heldLocks), (held) => (HashSet.has(held, keyOf(sessionId)) ? held : undefined))
  return Object.assign(withLock, { busy, span })
}

export interface StoreOptions {
  /** When a session's history journal is folded into messages.json. */
  readonly journal?: JournalOptions
  /** The process's session cache (a gateway's, shared by its tenants' stores); one of its own without. */
  readonly cache?: SessionCache.Service
}

/** The store for a data root (created if missing). */
export const makeUnsafe = (rootDir: string, options: StoreOptions = {}): Service => {
  const root = resolve(rootDir)
  // Paths inside messages are relative to the root: an error never shows the server's folders.
  const shown = (path: string) => {
    const rel = relative(root, path)
    return rel === "" ? "(data root)" : rel.startsWith("..") ? basename(path) : rel.split(sep).join("/")
  }
  const scrub = (text: string) => text.split(root).join("(data root)")
  const io = (path: string, operation: string) => (e: unknown) =>
    new StoreIOError({
      path: shown(path),
      operation,
      reason: scrub(e instanceof Error ? e.message : String(e))
    })
  const attempt = <A>(path: string, operation: string, f: () => Promise<A>) =>
    Effect.tryPromise({ try: f, catch: io(path, operation) })

  let rootReal: string | undefined
  const ready = Effect.suspend(() =>
    rootReal !== undefined
      ? Effect.succeed(rootReal)
      : attempt(root, "open", async () => {
          await mkdir(root, { recursive: true })
          rootReal = await realpath(root)
          return rootReal
        })
  )

  // A new span waits for a fold of the session's history that the span before it left running.
  const withSessionLock = sessionLocks(root, (sessionId) => history.settle(sessionId))
  const indexLock = Effect.unsafeMakeSemaphore(1)

  // --- who may touch what
  const isGlobalReal = (real: string, base: string) =>
    dirname(real) === base && !isRootIndexFile(basename(real)) && !basename(real).startsWith(".")
  const sessionBase = (base: string, sessionId: string) => join(base, sessionId)
  const allowedFor = (base: string, scope: Scope, sessionId: string) =>
    scope === "global"
      ? (real: string) => isGlobalReal(real, base)
      : (real: string) => isInside(real, sessionBase(base, sessionId)) || isGlobalReal(real, base)

  const cleanFor = (scope: Scope, path: string) =>
    scope === "global"
      ? Either.match(cleanGlobalPath(path), { onLeft: Effect.fail, onRight: Effect.succeed })
      : checkPath(path)

  // --- the index, cached by its stamp
  const indexFile = join(root, INDEX_FILE)
  let indexCache: { readonly stamp: string; readonly records: ReadonlyArray<SessionRecord> } | undefined
  const readIndex = Effect.gen(function* () {
    const base = yield* ready
    const stamp = stampNow(indexFile)
    if (stamp === undefined) return [] as ReadonlyArray<SessionRecord>
    if (indexCache?.stamp === stamp) return indexCache.records
    const read = yield* attempt(indexFile, "read", () =>
      readInside(indexFile, (real) => dirname(real) === base)
    )
    if (read._tag !== "Read") return [] as ReadonlyArray<SessionRecord>
    const records = yield* Either.match(decodeIndex(read.text), {
      onLeft: () =>
        Effect.fail(
          new StoreIOError({
            path: INDEX_FILE,
            operation: "parse",
            reason: "it is not a JSON array of session records"
          })
        ),
      onRight: Effect.succeed
    })
    indexCache = { stamp: read.stamp, records }
    return records
  })
  const writeAt = (
    base: string,
    dir: string,
    path: string,
    text: string,
    allowed: (real: string) => boolean
  ) =>
    Effect.tryPromise({
      try: () => writeInside(dir, path, text, allowed),
      catch: (e) =>
        e instanceof OutsideError
          ? new PathRefused({ path, reason: "leads out of its directory through a symlink" })
          : errnoOf(e) === "ENOENT" && dir !== base
            ? new SessionNotFound({ sessionId: basename(dir) })
            : // The caller's path conflicts with what is there: a file where a directory is
              // needed, or a directory where the file would go (a client error, not the server's).
              errnoOf(e) === "ENOTDIR" || errnoOf(e) === "EISDIR" || errnoOf(e) === "ENAMETOOLONG"
              ? new PathRefused({
                  path,
                  reason:
                    errnoOf(e) === "ENOTDIR"
                      ? "a part of the path is a file, not a directory"
                      : errnoOf(e) === "EISDIR"
                        ? "a directory is in the way of the file"
                        : "the path is too long for the file system"
                })
              : io(join(dir, path), "write")(e)
    })
  const writeIndex = (records: ReadonlyArray<SessionRecord>) =>
    Effect.flatMap(ready, (base) =>
      writeAt(base, base, INDEX_FILE, jsonText(records), (real) => real === base)
    )

  /**
   * A file of records at the top of the root, read whole and decoded once per version (device,
   * inode, time and size): while it is unchanged, reading it is one `stat`.
   */
  const rootRecords = <A>(
    name: string,
    decode: (text: string, file: string) => Either.Either<ReadonlyArray<A>, StoreError>
  ) => {
    const file = join(root, name)
    let cached: { readonly stamp: string; readonly records: ReadonlyArray<A> } | undefined
    return Effect.gen(function* () {
      const base = yield* ready
      const stamp = stampNow(file)
      if (stamp === undefined) return [] as ReadonlyArray<A>
      if (cached?.stamp === stamp) return cached.records
      const read = yield* attempt(file, "read", () => readInside(file, (real) => dirname(real) === base))
      if (read._tag !== "Read") return [] as ReadonlyArray<A>
      const records = yield* fromEither(decode(read.text, name))
      cached = { stamp: read.stamp, records }
      return records
    })
  }

  // --- the distributions, read whole (a retry looks its key up; they are few and small)
  const distributionsLock = Effect.unsafeMakeSemaphore(1)
  const readDistributions = rootRecords(DISTRIBUTIONS_FILE, decodeDistributions)

  // --- the root's memory (L3, L4), read whole and rewritten whole under its lock; every compile
  // reads it, so an unchanged file is not read again
  const globalMemoryLock = Effect.unsafeMakeSemaphore(1)
  const readGlobalMemory = rootRecords(GLOBAL_MEMORY_FILE, decodeMemory)

  // What the store keeps between requests is in the session cache (the process's when it is given
  // one), in its budget of bytes: the history's state, the files read and memory.json decoded.
  const cache = options.cache ?? SessionCache.make()

  // --- a session's memory.json, decoded once per text (the cached read hands back the same text
  // while the file is unchanged); it weighs its text's shapes (`TEXT_FACTOR`)
  const sessionMemory = cache.holder<{ readonly text: string; readonly entries: ReadonlyArray<MemoryEntry> }>(
    "session memory",
    { weigh: (m) => m.text.length * SessionCache.TEXT_FACTOR + ENTRY_BYTES }
  )
  const readSessionMemory = Effect.fnUntraced(function* (sessionId: string) {
    const text = yield* readChecked("session", sessionId, MEMORY_FILE)
    if (text === undefined) return [] as ReadonlyArray<MemoryEntry>
    const key = SessionCache.keyOf(root, sessionId)
    const hit = sessionMemory.get(key)
    if (hit?.text === text) return hit.entries
    const entries = yield* fromEither(decodeMemory(text, `${sessionId}/${MEMORY_FILE}`))
    sessionMemory.set(key, { text, entries })
    return entries
  })

  const getSession = Effect.fnUntraced(function* (id: string) {
    yield* checkSessionId(id)
    const found = (yield* readIndex).find((r) => r.id === id)
    if (found === undefined) return yield* new SessionNotFound({ sessionId: id })
    return found
  })

  // --- reads, cached
  // What each read found, a file's text or that there was none (`stamp` undefined), kept while one
  // `stat` shows the same: by session (the root's files under a key no session has), each session's
  // reads weighing their texts, so they leave with the session when the cache is over its budget.
  const reads = cache.holder<Map<string, KnownRead>>("file reads", { weigh: weighReads })
  const readsKey = (scope: Scope, sessionId: string) =>
    SessionCache.keyOf(root, scope === "global" ? "" : sessionId)
  const forgetRead = (sessionId: string, clean: string) => {
    const key = readsKey("session", sessionId)
    const held = reads.get(key)
    if (held?.delete(clean)) reads.set(key, held)
  }
  const readChecked = Effect.fnUntraced(function* (scope: Scope, sessionId: string, path: string) {
    const clean = yield* cleanFor(scope, path)
    if (scope === "session") {
      yield* checkSessionId(sessionId)
      const refused = readRefusal(clean)
      if (refused !== undefined) return yield* refused
      // The history is messages.json with its journal folded in, however it is asked for.
      if (clean === HISTORY_FILE) return yield* history.readText(sessionId)
    }
    const key = readsKey(scope, sessionId)
    const seen = reads.get(key)?.get(clean)
    // The same inode, unchanged, is the file already proven to be inside (or still no file): one stat.
    if (seen !== undefined && stampNow(seen.full) === seen.stamp) return seen.text
    const base = yield* ready
    const full = scope === "global" ? join(base, clean) : join(base, sessionId, clean)
    const read = yield* attempt(full, "read", () => readInside(full, allowedFor(base, scope, sessionId)))
    if (read._tag === "Outside")
      return yield* new PathRefused({
        path: clean,
        reason: "leads out of what the session may read through a symlink"
      })
    const held = reads.get(key) ?? new Map<string, KnownRead>()
    held.delete(clean)
    held.set(
      clean,
      read._tag === "Read"
        ? { full, stamp: read.stamp, text: read.text }
        : { full, stamp: undefined, text: undefined }
    )
    // At most MAX_READS files of one session, and at most a quarter of the cache's budget (the
    // least recently read out first; the file just read stays).
    bounded(held, MAX_READS)
    const limit = cache.maxBytes / 4
    let weight = weighReads(held)
    for (const [path, r] of held) {
      if (weight <= limit || held.size <= 1) break
      held.delete(path)
      weight -= weighRead(r)
    }
    reads.set(key, held, weight)
    return read._tag === "Read" ? read.text : undefined
  })

  // A session's listing, kept while none of its directories changed (an entry made, removed or
  // renamed changes its directory's stamp); a listing with a link is made again each time (the
  // file a link leads to may change with no change here).
  const listings = new Map<
    string,
    {
      readonly dirs: ReadonlyArray<readonly [string, string | undefined]>
      readonly files: ReadonlyArray<string>
    }
  >()
  const listSession = Effect.fnUntraced(function* (sessionId: string) {
    yield* checkSessionId(sessionId)
    const base = yield* ready
    const dir = sessionBase(base, sessionId)
    const listed = listings.get(`${base}\u0000${sessionId}`)
    if (listed?.dirs.every(([d, stamp]) => dirStampNow(d) === stamp)) return listed.files
    // Each directory stamped before it is read: a change meanwhile lists it again next time.
    const dirs: Array<readonly [string, string | undefined]> = []
    const entries: Array<Dirent> = []
    for (let i = 0, queue = [dir]; i < queue.length; i++) {
      const at = queue[i]!
      dirs.push([at, dirStampNow(at)])
      const found: Array<Dirent> =
        (yield* attempt(at, "list", () =>
          readdir(at, { withFileTypes: true }).catch((e) =>
            errnoOf(e) === "ENOENT" || errnoOf(e) === "ENOTDIR" ? [] : Promise.reject(e)
          )
        )) ?? []
      for (const entry of found) {
        entries.push(entry)
        if (entry.isDirectory() && !entry.name.startsWith(".")) queue.push(join(at, entry.name))
      }
    }
    const files: Array<string> = []
    for (const entry of entries) {
      if (entry.name.startsWith(".") || isTempFile(entry.name)) continue
      const full = join(entry.parentPath, entry.name)
      const rel = relative(dir, full).split(sep).join("/")
      if (rel.split("/").some((s) => s.startsWith("."))) continue
      // The journal is part of messages.json (a session with a journal alone has its history).
      if (rel === HISTORY_JOURNAL) {
        if (!entries.some((e) => e.parentPath === entry.parentPath && e.name === HISTORY_FILE))
          files.push(HISTORY_FILE)
        continue
      }
      if (entry.isFile()) files.push(rel)
      else if (entry.isSymbolicLink()) {
        // A link is listed when the file it leads to is one the session may read.
        const target = yield* Effect.promise(() =>
          realpath(full).then(
            (real) => stat(real).then((info) => (info.isFile() ? real : undefined)),
            () => undefined
          )
        )
        if (target !== undefined && allowedFor(base, "session", sessionId)(target)) files.push(rel)
      }
    }
    files.sort()
    const key = `${base}\u0000${sessionId}`
    listings.delete(key)
    if (!entries.some((e) => e.isSymbolicLink())) {
      listings.set(key, { dirs, files })
      bounded(listings, 1024)
    }
    return files
  })
  const listGlobal = Effect.gen(function* () {
    const base = yield* ready
    const entries = yield* attempt(base, "list", () => readdir(base, { withFileTypes: true }))
    return entries
      .filter((e) => e.isFile() && !isRootIndexFile(e.name) && !e.name.startsWith(".") && !isTempFile(e.name))
      .map((e) => e.name)
      .sort()
  })

  const readText = (sessionId: string | undefined, path: string) =>
    Effect.gen(function* () {
      const scope: Scope = sessionId === undefined ? "global" : "session"
      const clean = yield* cleanFor(scope, path)
      const text = yield* readChecked(scope, sessionId ?? "", clean)
      if (text === undefined) return yield* new FileNotFound({ path: clean })
      return { clean, text }
    })
  const modifiedAtOf = (sessionId: string | undefined, clean: string) =>
    Effect.flatMap(ready, (base) => {
      const mtimeOf = (file: string) =>
        stat(file).then(
          (s) => s.mtimeMs,
          () => 0
        )
      // The history changes in its journal too: the later of the two.
      const times =
        sessionId === undefined
          ? [mtimeOf(join(base, clean))]
          : clean === HISTORY_FILE
            ? [mtimeOf(join(base, sessionId, clean)), mtimeOf(join(base, sessionId, HISTORY_JOURNAL))]
            : [mtimeOf(join(base, sessionId, clean))]
      return Effect.promise(() => Promise.all(times).then((ms) => new Date(Math.max(...ms)).toISOString()))
    })
  const infoOf = (sessionId: string, clean: string, content: string) =>
    Effect.map(
      modifiedAtOf(sessionId, clean),
      (modifiedAt): FileInfo => ({
        path: clean,
        size: Buffer.byteLength(content, "utf8"),
        version: versionOf(content),
        modifiedAt
      })
    )

  /** Writes a file of an existing session, inside it, atomically (under the session's lock). */
  const writeSessionFile = Effect.fnUntraced(function* (sessionId: string, clean: string, text: string) {
    const base = yield* ready
    const dir = sessionBase(base, sessionId)
    if (!isDirectoryNow(dir)) return yield* new SessionNotFound({ sessionId })
    yield* writeAt(base, dir, clean, text, allowedFor(base, "session", sessionId)).pipe(
      Effect.catchTag("SessionNotFound", () => Effect.fail(new SessionNotFound({ sessionId })))
    )
    forgetRead(sessionId, clean)
  })

  const updatingMemory = memoryUpdater({
    getSession,
    readSessionMemory,
    writeMemory: (sessionId, text) => writeSessionFile(sessionId, MEMORY_FILE, text)
  })

  const history = makeJournalFiles(
    {
      ready,
      allowed: (base, sessionId) => allowedFor(base, "session", sessionId),
      withSessionLock,
      withoutLocks: (effect) => Effect.locally(effect, heldLocks, HashSet.empty()),
      busy: withSessionLock.busy,
      lockSpan: withSessionLock.span,
      writeSessionFile,
      io,
      scope: root,
      cache
    },
    options.journal
  )

  const service: Service = {
    root,
    scope: Effect.succeed(root),
    cache,
    listSessions: readIndex,
    // Locks in one order everywhere: the session's, then the index's (a deletion waiting for a
    // running turn holds no index lock meanwhile).
    createSession: (input) => {
      const id = input.id ?? `s-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`
      return withSessionLock(
        id,
        indexLock.withPermits(1)(
          Effect.gen(function* () {
            const base = yield* ready
            const records = yield* readIndex
            yield* checkSessionId(id)
            if (records.some((r) => r.id === id)) return yield* new SessionExists({ sessionId: id })
            const dir = sessionBase(base, id)
            const existing = yield* Effect.promise(() =>
              lstat(dir).then(
                (s) => s,
                () => undefined
              )
            )
            if (existing !== undefined && !existing.isDirectory())
              return yield* new PathRefused({ path: id, reason: "a file of the data root has this name" })
            // A folder without a record is what a deleted session left: the new one starts empty.
            if (existing !== undefined) {
              yield* history.forget(id)
              yield* attempt(dir, "create", () => rm(dir, { recursive: true, force: true }))
            }
            yield* attempt(dir, "create", () => mkdir(dir))
            const record = newRecord(id, input.concept, input.metadata, new Date().toISOString())
            yield* writeIndex([...records, record])
            return record
          })
        )
      )
    },
    getSession,
    updateSession: (id, patch) =>
      withSessionLock(
        id,
        indexLock.withPermits(1)(
          Effect.gen(function* () {
            const current = yield* getSession(id)
            const next = patchRecord(current, patch, new Date().toISOString())
            const records = yield* readIndex
            yield* writeIndex(records.map((r) => (r.id === id ? next : r)))
            return next
          })
        )
      ),
    deleteSession: (id) =>
      withSessionLock(
        id,
        indexLock.withPermits(1)(
          Effect.gen(function* () {
            const base = yield* ready
            yield* getSession(id)
            yield* history.forget(id)
            const records = yield* readIndex
            // The index first: a crash after it leaves an orphan directory, never a dangling record.
            yield* writeIndex(records.filter((r) => r.id !== id))
            yield* attempt(id, "delete", () => rm(sessionBase(base, id), { recursive: true, force: true }))
            reads.delete(readsKey("session", id))
            sessionMemory.delete(SessionCache.keyOf(root, id))
          })
        )
      ),
    listFiles: (sessionId) =>
      Effect.gen(function* () {
        yield* getSession(sessionId)
        const files: Array<FileInfo> = []
        for (const path of yield* listSession(sessionId)) {
          const text = yield* readChecked("session", sessionId, path).pipe(
            Effect.catchTag("PathRefused", () => Effect.succeed(undefined))
          )
          if (text !== undefined) files.push(yield* infoOf(sessionId, path, text))
        }
        return files
      }),
    readFile: (sessionId, path, range) =>
      Effect.gen(function* () {
        if (sessionId !== undefined) yield* getSession(sessionId)
        const { clean, text: content } = yield* readText(sessionId, path)
        const modifiedAt = yield* modifiedAtOf(sessionId, clean)
        return yield* fromEither(contentOf(clean, content, modifiedAt, range))
      }),
    writeFile: (sessionId, path, content, options = {}) =>
      withSessionLock(
        sessionId,
        Effect.gen(function* () {
          yield* getSession(sessionId)
          const clean = yield* checkPath(path)
          const refused = writeRefusal(clean, options)
          if (refused !== undefined) return yield* refused
          const current = yield* readChecked("session", sessionId, clean)
          const next = yield* fromEither(nextText(clean, current, content, options))
          yield* writeSessionFile(sessionId, clean, next)
          return yield* infoOf(sessionId, clean, next)
        })
      ),
    deleteFile: (sessionId, path, ifMatch) =>
      withSessionLock(
        sessionId,
        Effect.gen(function* () {
          yield* getSession(sessionId)
          const clean = yield* checkPath(path)
          if (isHistoryFile(clean))
            return yield* new PathRefused({
              path: clean,
              reason: "history files are removed with their session only"
            })
          const current = yield* readChecked("session", sessionId, clean)
          if (current === undefined) return yield* new FileNotFound({ path: clean })
          const conflict = versionCheck(clean, current, ifMatch)
          if (conflict !== undefined) return yield* conflict
          const base = yield* ready
          const removed = yield* Effect.tryPromise({
            try: () =>
              unlinkInside(sessionBase(base, sessionId), clean, allowedFor(base, "session", sessionId)),
            catch: (e) =>
              e instanceof OutsideError
                ? new PathRefused({ path: clean, reason: "leads out of its directory through a symlink" })
                : io(clean, "delete")(e)
          })
          forgetRead(sessionId, clean)
          if (removed !== "removed") return yield* new FileNotFound({ path: clean })
        })
      ),
    withSessionLock,
    hasSession: Effect.fnUntraced(function* (sessionId: string) {
      yield* checkSessionId(sessionId)
      const base = yield* ready
      return isDirectoryNow(sessionBase(base, sessionId))
    }),
    read: readChecked,
    readMany: (scope, sessionId, paths) =>
      Effect.forEach(paths, (path) => readChecked(scope, sessionId, path), { concurrency: 16 }),
    list: (scope, sessionId) => (scope === "global" ? listGlobal : listSession(sessionId)),
    readHistory: (sessionId) => readChecked("session", sessionId, HISTORY_FILE),
    writeHistory: history.writeWhole,
    readHistoryJson: (sessionId) => Effect.zipRight(checkSessionId(sessionId), history.readJson(sessionId)),
    updateHistory: history.update,
    writeToolResult: (sessionId, callId, text) =>
      withSessionLock(
        sessionId,
        Effect.gen(function* () {
          yield* checkSessionId(sessionId)
          const path = toolResultPath(callId)
          yield* writeSessionFile(sessionId, path, text)
          return path
        })
      ),
    readToolResult: (sessionId, callId) => readChecked("session", sessionId, toolResultPath(callId)),
    readTasks: (sessionId) =>
      Effect.gen(function* () {
        yield* getSession(sessionId)
        const text = yield* readChecked("session", sessionId, TASKS_FILE)
        if (text === undefined) return []
        return yield* fromEither(decodeTasks(text, `${sessionId}/${TASKS_FILE}`))
      }),
    writeTasks: (sessionId, tasks) =>
      withSessionLock(
        sessionId,
        Effect.gen(function* () {
          yield* getSession(sessionId)
          yield* writeSessionFile(sessionId, TASKS_FILE, jsonText(tasks))
        })
      ),
    readMemory: (sessionId) => Effect.zipRight(getSession(sessionId), readSessionMemory(sessionId)),
    updateMemory: (sessionId, update) => withSessionLock(sessionId, updatingMemory(sessionId, update)),
    readGlobalMemory,
    updateGlobalMemory: (update) =>
      globalMemoryLock.withPermits(1)(
        Effect.gen(function* () {
          const base = yield* ready
          const before = yield* readGlobalMemory
          const after = update(before)
          if (after !== before)
            yield* writeAt(base, base, GLOBAL_MEMORY_FILE, jsonText(after), (real) => real === base)
          return after
        })
      ),
    readRun: (sessionId, runId) =>
      Effect.gen(function* () {
        yield* getSession(sessionId)
        const text = RUN_ID.test(runId) ? yield* readChecked("session", sessionId, runPath(runId)) : undefined
        if (text === undefined) return yield* new RunNotFound({ sessionId, runId })
        return yield* fromEither(decodeRun(text, `${sessionId}/${runPath(runId)}`))
      }),
    writeRun: (state) =>
      Effect.gen(function* () {
        if (!RUN_ID.test(state.runId))
          return yield* new PathRefused({ path: state.runId.slice(0, 120), reason: "not a run id" })
        yield* getSession(state.sessionId)
        yield* writeSessionFile(state.sessionId, runPath(state.runId), jsonText(state))
      }),
    listRuns: (sessionId) =>
      Effect.gen(function* () {
        yield* getSession(sessionId)
        const files = yield* listSession(sessionId)
        return files
          .filter((f) => f.startsWith(`${RUNS_DIR}/`) && f.endsWith(".json"))
          .map((f) => f.slice(RUNS_DIR.length + 1, -".json".length))
          .filter((id) => RUN_ID.test(id))
          .sort()
      }),
    readKnowledgeIndex: Effect.gen(function* () {
      const base = yield* ready
      const file = join(base, KNOWLEDGE_INDEX_FILE)
      const read = yield* attempt(file, "read", () => readInside(file, (real) => dirname(real) === base))
      return read._tag === "Read" ? read.text : undefined
    }),
    writeKnowledgeIndex: (text) =>
      Effect.flatMap(ready, (base) =>
        writeAt(base, base, KNOWLEDGE_INDEX_FILE, text, (real) => real === base)
      ),
    listDistributions: readDistributions,
    putDistribution: (distribution) =>
      distributionsLock.withPermits(1)(
        Effect.gen(function* () {
          const base = yield* ready
          const log = withDistribution(yield* readDistributions, distribution)
          yield* writeAt(base, base, DISTRIBUTIONS_FILE, jsonText(log), (real) => real === base)
        })
      ),
    cleanTemporaryFiles: Effect.gen(function* () {
      const base = yield* ready
      const entries = yield* attempt(base, "list", () =>
        readdir(base, { recursive: true, withFileTypes: true })
      )
      let removed = 0
      for (const entry of entries) {
        if (!entry.isFile() || !isTempFile(entry.name)) continue
        yield* attempt(entry.name, "remove", () => rm(join(entry.parentPath, entry.name), { force: true }))
        removed++
      }
      return removed
    }),
    flush: history.flush
  }
  return service
}

export const make = (root: string, options?: StoreOptions): Effect.Effect<Service> =>
  Effect.sync(() => makeUnsafe(root, options))

/** How long a store being released waits to fold its journals (a fold not done is read as the journal). */
const FLUSH_TIMEOUT = "5 seconds"

/** A store whose history journals are folded into messages.json when its scope closes. */
export const makeScoped = (
  root: string,
  options?: StoreOptions
): Effect.Effect<Service, never, EffectScope.Scope> =>
  Effect.acquireRelease(make(root, options), (store) =>
    // Interruptible inside the release, so the timeout can end it.
    store.flush.pipe(Effect.interruptible, Effect.timeout(FLUSH_TIMEOUT), Effect.ignore)
  )

export const layer = (root: string, options?: StoreOptions): Layer.Layer<Store> =>
  Layer.scoped(Store, makeScoped(root, options))

/**
 * Copies `from` (an example data root) into `root` when `root` has no sessions.json yet: the
 * embedded default a fresh clone starts with. Returns whether it seeded.
 */
export const seedIfEmpty = (root: string, from: string) =>
  Effect.tryPromise({
    try: async () => {
      const exists = await stat(join(root, INDEX_FILE)).then(
        () => true,
        (e) => (errnoOf(e) === "ENOENT" ? false : Promise.reject(e))
      )
      if (exists) return false
      await mkdir(root, { recursive: true })
      await cp(from, root, { recursive: true, errorOnExist: false, force: false })
      return true
    },
    catch: (e) =>
      new StoreIOError({
        path: "(data root)",
        operation: "seed",
        reason: e instanceof Error ? ((e as NodeJS.ErrnoException).code ?? e.message) : String(e)
      })
  })
