/**
 * The store in PostgreSQL (`Migrations.ts` has the schema): what the file store keeps in a data
 * root, one tenant's rows, for any number of gateway processes on one database. The same
 * `Store.Service`, with the same rules (`@ctxo/store/Paths`: session ids and paths;
 * `internal/fileEdits`: versions, `If-Match`, line ranges, who may write which file) and the same
 * errors.
 *
 * - **The lock.** `withSessionLock` holds a PostgreSQL advisory lock named by the tenant and the
 *   session (on a connection of its own, `Database.withLock`) for as long as the locked effect
 *   runs, a turn included: two processes never run turns of one session at once. Within a process
 *   the lock is first taken in memory (re-entrant within the fiber that holds it, like the file
 *   store's), so one connection at most waits per session.
 * - **History.** A recorded change is one transaction: the messages from the change's first new
 *   one are deleted and its messages inserted, and the history's `seq` moves to a new value of one
 *   sequence; it commits (durably: PostgreSQL's synchronous commit) before the change is
 *   acknowledged. The decoded document is kept in memory with its `seq`: a read asks for the `seq`
 *   only and hands back the same object while it is unchanged; a newer one (another process
 *   recorded) reads the messages written since.
 * - **Nothing else is cached**: sessions, files, tasks and memory are read from the database each
 *   time, so a change made by another process is seen by the next read.
 * - Writes of one session happen under its lock, as in the file store; the root's memory and the
 *   distributions are changed in one transaction each (a row lock), never by read-modify-write
 *   across processes.
 */

import type { Importer } from "@ctxo/store/FileImport"
import { contentOf, nextText, readRefusal, versionCheck, writeRefusal } from "@ctxo/store/FileRules"
import { applyPatch, foldJournal, type HistoryPatch, JOURNAL_SEQ } from "@ctxo/store/HistoryJournal"
import { timedWait } from "@ctxo/store/LockSpan"
import {
  checkPath,
  checkSessionId,
  cleanGlobalPath,
  GLOBAL_MEMORY_FILE,
  HISTORY_FILE,
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
} from "@ctxo/store/Paths"
import {
  Distribution,
  decodeMemory,
  decodeTasks,
  jsonText,
  type MemoryEntry,
  type SessionRecord
} from "@ctxo/store/Records"
import { decodeRun } from "@ctxo/store/Runs"
import * as SessionCache from "@ctxo/store/SessionCache"
import {
  type FileContent,
  type FileInfo,
  memoryUpdater,
  newRecord,
  patchRecord,
  type Service,
  Store,
  sessionLocks,
  versionOf
} from "@ctxo/store/Store"
import {
  CorruptFile,
  FileNotFound,
  PathRefused,
  RunNotFound,
  SessionExists,
  SessionNotFound,
  type StoreError,
  StoreIOError,
  VersionConflict
} from "@ctxo/store/StoreErrors"
import { SqlError } from "@effect/sql/SqlError"
import { Effect, Either, FiberRef, HashSet, Layer, Schema } from "effect"
import { Database, LockUnavailable } from "./Database.ts"

export interface PgStoreOptions {
  /**
   * The tenant's data root as the gateway names it (its path): the store's `root` and `scope`, so
   * per-session state kept beside the store is keyed the same whichever store serves it.
   */
  readonly root: string
  /** The tenant whose rows this store reads and writes (`default` without API keys). */
  readonly tenant: string
  /** The process's session cache (a gateway's, shared by its tenants' stores); one of its own without. */
  readonly cache?: SessionCache.Service | undefined
}

interface SessionRow {
  readonly id: string
  readonly concept: string
  readonly created_at: string
  readonly state: SessionRecord["state"]
  readonly state_changed_at: string
  readonly metadata: Readonly<Record<string, string>>
}

const recordOf = (row: SessionRow): SessionRecord => ({
  id: row.id,
  concept: row.concept,
  createdAt: row.created_at,
  state: row.state,
  stateChangedAt: row.state_changed_at,
  metadata: row.metadata
})

/** A history as this process last read or wrote it. */
interface HistoryEntry {
  readonly seq: number
  /** The document without `journalSeq` (undefined: none), and messages.json's text of it. */
  readonly json: unknown
  readonly text: string | undefined
  /** Structured: the messages (the same array as `json.messages`); undefined for a raw history. */
  readonly messages: ReadonlyArray<unknown> | undefined
  readonly modifiedAt: string
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const fromEither = <A, E>(either: Either.Either<A, E>): Effect.Effect<A, E> =>
  Either.match(either, { onLeft: Effect.fail, onRight: Effect.succeed })

/** Paths a listing leaves out, as the file store does: hidden segments and temporary files' names. */
const listed = (path: string) =>
  !path.split("/").some((s) => s.startsWith(".")) && !isTempFile(path.split("/").at(-1) ?? path)

const sorted = (paths: Iterable<string>) => [...paths].sort()

const byteText = (content: Uint8Array | string) =>
  typeof content === "string" ? content : Buffer.from(content).toString("utf8")

/** A unique violation of `constraint` (PostgreSQL's 23505), when the error is one. */
const violates = (error: SqlError, constraint: string) => {
  const cause = error.cause as { readonly code?: unknown; readonly constraint?: unknown } | undefined
  return cause?.code === "23505" && cause.constraint === constraint
}

const decodeDistribution = Schema.decodeUnknownEither(Distribution)

const HISTORY_BATCH = 1000

/** The session locks this fiber holds (tenant + session), so a turn's own writes do not wait on it. */
const heldLocks = FiberRef.unsafeMake(HashSet.empty<string>())

export const make = (options: PgStoreOptions): Effect.Effect<Service, never, Database> =>
  Effect.map(Database, (db) => makeWith(db, options))

/** The store of `options.tenant` over `db`. */
export const makeWith = (db: Database["Type"], options: PgStoreOptions): Service => {
  const { sql } = db
  const tenant = options.tenant
  const root = options.root
  const cache = options.cache ?? SessionCache.make()

  const ioError =
    (path: string, operation: string) =>
    (e: SqlError): StoreIOError => {
      const cause = e.cause instanceof Error ? e.cause.message : e.message
      return new StoreIOError({ path, operation, reason: `the database: ${cause}`.slice(0, 300) })
    }
  const q = <A, E>(
    path: string,
    operation: string,
    effect: Effect.Effect<A, E | SqlError>
  ): Effect.Effect<A, Exclude<E, SqlError> | StoreIOError> =>
    Effect.catchIf(
      effect,
      (e): e is SqlError => e instanceof SqlError,
      (e) => Effect.fail(ioError(path, operation)(e))
    ) as Effect.Effect<A, Exclude<E, SqlError> | StoreIOError>

  // --- the lock: in memory first (re-entrant), then across processes
  const inProcess = sessionLocks(`postgres\u0000${tenant}`)
  const withSessionLock = <A, E, R>(sessionId: string, effect: Effect.Effect<A, E, R>) =>
    Effect.flatMap(FiberRef.get(heldLocks), (held) => {
      const key = `${tenant}\u0000${sessionId}`
      if (HashSet.has(held, key)) return effect
      const inside = Effect.locally(effect, heldLocks, HashSet.add(held, key))
      // The span is the wait: it ends when the lock is held.
      return timedWait(sessionId, (entered) =>
        inProcess(
          sessionId,
          db.withLock(`session\u0000${tenant}\u0000${sessionId}`, () => Effect.zipRight(entered, inside))
        ).pipe(
          Effect.catchIf(
            (e): e is LockUnavailable & E => e instanceof LockUnavailable,
            (e) => Effect.die(new StoreIOError({ path: sessionId, operation: "lock", reason: e.message }))
          )
        )
      ) as Effect.Effect<A, E, R>
    })

  // --- sessions
  const sessionRows = q(
    "(sessions)",
    "list",
    sql<SessionRow>`
      SELECT id, concept, created_at, state, state_changed_at, metadata
      FROM ctxo_sessions WHERE tenant = ${tenant} ORDER BY position`
  )
  const getSession = Effect.fnUntraced(function* (id: string) {
    yield* checkSessionId(id)
    const rows = yield* q(
      id,
      "read",
      sql<SessionRow>`
          SELECT id, concept, created_at, state, state_changed_at, metadata
          FROM ctxo_sessions WHERE tenant = ${tenant} AND id = ${id}`
    )
    const row = rows[0]
    if (row === undefined) return yield* new SessionNotFound({ sessionId: id })
    return recordOf(row)
  })
  const sessionExists = (id: string) =>
    Effect.map(
      q(
        id,
        "read",
        sql<{ readonly n: number }>`
        SELECT 1 AS n FROM ctxo_sessions WHERE tenant = ${tenant} AND id = ${id}`
      ),
      (rows) => rows.length > 0
    )
  const requireSession = (id: string) =>
    Effect.flatMap(sessionExists(id), (exists) =>
      exists ? Effect.void : Effect.fail(new SessionNotFound({ sessionId: id }))
    )

  // --- files
  const fileRow = (sessionId: string, clean: string) =>
    Effect.map(
      q(
        `${sessionId}/${clean}`,
        "read",
        sql<{ readonly content: Uint8Array; readonly modified_at: Date }>`
          SELECT content, modified_at FROM ctxo_files
          WHERE tenant = ${tenant} AND session_id = ${sessionId} AND path = ${clean}`
      ),
      (rows) =>
        rows[0] === undefined
          ? undefined
          : { text: byteText(rows[0].content), modifiedAt: rows[0].modified_at.toISOString() }
    )
  const globalRow = (clean: string) =>
    Effect.map(
      q(
        clean,
        "read",
        sql<{ readonly content: Uint8Array; readonly modified_at: Date }>`
          SELECT content, modified_at FROM ctxo_global_files WHERE tenant = ${tenant} AND name = ${clean}`
      ),
      (rows) =>
        rows[0] === undefined
          ? undefined
          : { text: byteText(rows[0].content), modifiedAt: rows[0].modified_at.toISOString() }
    )
  /** Writes a file of an existing session (its lock held); the time it was written. */
  const putFile = Effect.fnUntraced(function* (sessionId: string, clean: string, text: string) {
    const bytes = Buffer.from(text, "utf8")
    const rows = yield* q(
      `${sessionId}/${clean}`,
      "write",
      sql<{ readonly modified_at: Date }>`
          INSERT INTO ctxo_files (tenant, session_id, path, content, version, size)
          SELECT ${tenant}, ${sessionId}, ${clean}, ${bytes}, ${versionOf(text)}, ${bytes.length}
          WHERE EXISTS (SELECT 1 FROM ctxo_sessions WHERE tenant = ${tenant} AND id = ${sessionId})
          ON CONFLICT (tenant, session_id, path) DO UPDATE
            SET content = excluded.content, version = excluded.version, size = excluded.size,
                modified_at = now()
          RETURNING modified_at`
    )
    if (rows[0] === undefined) return yield* new SessionNotFound({ sessionId })
    return rows[0].modified_at.toISOString()
  })
  /** The file store's refusals of a path whose parts are files, or that is a directory of files. */
  const pathConflict = Effect.fnUntraced(function* (sessionId: string, clean: string) {
    const segments = clean.split("/")
    const parents = segments.slice(0, -1).map((_, i) => segments.slice(0, i + 1).join("/"))
    const rows = yield* q(
      `${sessionId}/${clean}`,
      "write",
      sql<{ readonly parent: boolean }>`
          SELECT path = ANY(${parents}::text[]) AS parent FROM ctxo_files
          WHERE tenant = ${tenant} AND session_id = ${sessionId}
            AND (path = ANY(${parents}::text[]) OR starts_with(path, ${`${clean}/`}))
          LIMIT 1`
    )
    const row = rows[0]
    if (row === undefined) return
    return yield* new PathRefused({
      path: clean,
      reason: row.parent
        ? "a part of the path is a file, not a directory"
        : "a directory is in the way of the file"
    })
  })
  const infoOf = (clean: string, text: string, modifiedAt: string): FileInfo => ({
    path: clean,
    size: Buffer.byteLength(text, "utf8"),
    version: versionOf(text),
    modifiedAt
  })

  // --- history
  // In the session cache's budget: a long session's JSON is large.
  const held = cache.holder<HistoryEntry>("store history state")
  const histories = {
    get: (sessionId: string) => held.get(SessionCache.keyOf(root, sessionId)),
    delete: (sessionId: string) => held.delete(SessionCache.keyOf(root, sessionId))
  }
  const remember = (sessionId: string, entry: HistoryEntry) => {
    const key = SessionCache.keyOf(root, sessionId)
    held.set(key, entry)
    cache.sized(key, entry.text?.length ?? 0)
    return entry
  }
  const historyFile = (sessionId: string) => `${sessionId}/${HISTORY_FILE}`
  const corrupt = (sessionId: string, e: unknown) =>
    new CorruptFile({
      path: historyFile(sessionId),
      reason: `(root): not valid JSON (${e instanceof Error ? e.message.replace(/\s+/g, " ").slice(0, 120) : "syntax error"})`
    })

  interface HistoryHead {
    readonly seq: string
    readonly fields: Record<string, unknown>
    readonly messages_at: number
    readonly message_count: number
    readonly raw: string | null
    readonly modified_at: Date
  }
  /** The history as it is in the database now, from what this process holds when it is current. */
  const loadHistory = Effect.fnUntraced(function* (sessionId: string) {
    const cached = histories.get(sessionId)
    const heads = yield* q(
      historyFile(sessionId),
      "read",
      sql<HistoryHead>`
          SELECT seq, fields, messages_at, message_count, raw, modified_at FROM ctxo_histories
          WHERE tenant = ${tenant} AND session_id = ${sessionId}`
    )
    const head = heads[0]
    if (head === undefined) {
      histories.delete(sessionId)
      return undefined
    }
    const seq = Number(head.seq)
    if (cached !== undefined && cached.seq === seq) return cached
    const modifiedAt = head.modified_at.toISOString()
    if (head.raw !== null) {
      const text = head.raw
      let json: unknown
      try {
        json = JSON.parse(text)
      } catch (e) {
        return yield* corrupt(sessionId, e)
      }
      // A whole document written with the journal's number (a file store's): read without it.
      const plain = Either.getOrThrow(foldJournal(json, [])).json
      return remember(sessionId, { seq, json: plain, text, messages: undefined, modifiedAt })
    }
    // The messages written since what this process holds, else all of them.
    const since = cached?.messages === undefined ? 0 : cached.seq
    const rows = yield* q(
      historyFile(sessionId),
      "read",
      sql<{ readonly idx: number; readonly message: unknown }>`
          SELECT idx, message FROM ctxo_history_messages
          WHERE tenant = ${tenant} AND session_id = ${sessionId} AND written_seq > ${since}
          ORDER BY idx`
    )
    const first = rows[0]?.idx ?? head.message_count
    const kept = since === 0 ? [] : (cached?.messages ?? []).slice(0, Math.min(first, head.message_count))
    let messages: ReadonlyArray<unknown> = kept.concat(rows.map((r) => r.message))
    if (messages.length !== head.message_count || (since === 0 && first !== 0 && head.message_count > 0)) {
      // What this process held is not a prefix of it (rewritten meanwhile): all of it.
      const all = yield* q(
        historyFile(sessionId),
        "read",
        sql<{ readonly message: unknown }>`
            SELECT message FROM ctxo_history_messages
            WHERE tenant = ${tenant} AND session_id = ${sessionId} ORDER BY idx`
      )
      messages = all.map((r) => r.message)
    }
    const json = documentOf(head.fields, head.messages_at, messages)
    return remember(sessionId, { seq, json, text: jsonText(json), messages, modifiedAt })
  })

  /** Writes the history whole (its lock held, the session there): structured when it is a v1 document. */
  const putHistory = (sessionId: string, json: unknown, raw: string | undefined) =>
    Effect.gen(function* () {
      const structured = raw === undefined && isObject(json) && Array.isArray(json.messages)
      const seq = yield* nextSeq(sessionId)
      const { fields, messagesAt } = structured
        ? fieldsOf(json as Record<string, unknown>)
        : { fields: {}, messagesAt: 0 }
      const messages = structured
        ? ((json as Record<string, unknown>).messages as ReadonlyArray<unknown>)
        : []
      const rows = yield* q(
        historyFile(sessionId),
        "write",
        sql.withTransaction(
          Effect.gen(function* () {
            const head = yield* sql<{ readonly modified_at: Date }>`
              INSERT INTO ctxo_histories (tenant, session_id, seq, fields, messages_at, message_count, raw)
              SELECT ${tenant}, ${sessionId}, ${seq}, ${JSON.stringify(fields)}::json, ${messagesAt},
                ${messages.length}, ${structured ? null : (raw ?? jsonText(json))}
              WHERE EXISTS (SELECT 1 FROM ctxo_sessions WHERE tenant = ${tenant} AND id = ${sessionId})
              ON CONFLICT (tenant, session_id) DO UPDATE
                SET seq = excluded.seq, fields = excluded.fields, messages_at = excluded.messages_at,
                    message_count = excluded.message_count, raw = excluded.raw, modified_at = now()
              RETURNING modified_at`
            if (head.length === 0) return head
            yield* sql`DELETE FROM ctxo_history_messages WHERE tenant = ${tenant} AND session_id = ${sessionId}`
            yield* insertMessages(sessionId, 0, messages, seq)
            return head
          })
        )
      )
      if (rows[0] === undefined) return yield* new SessionNotFound({ sessionId })
      return { seq, modifiedAt: rows[0].modified_at.toISOString() }
    })
  const nextSeq = (sessionId: string) =>
    Effect.map(
      q(
        historyFile(sessionId),
        "write",
        sql<{ readonly seq: string }>`SELECT nextval('ctxo_history_seq') AS seq`
      ),
      (rows) => Number(rows[0]!.seq)
    )
  const insertMessages = (sessionId: string, from: number, messages: ReadonlyArray<unknown>, seq: number) =>
    Effect.forEach(
      Array.from({ length: Math.ceil(messages.length / HISTORY_BATCH) }, (_, i) => i * HISTORY_BATCH),
      (start) => {
        const batch = messages.slice(start, start + HISTORY_BATCH)
        const indexes = batch.map((_, i) => from + start + i)
        const texts = batch.map((m) => JSON.stringify(m))
        return sql`
          INSERT INTO ctxo_history_messages (tenant, session_id, idx, message, written_seq)
          SELECT ${tenant}, ${sessionId}, m.idx, m.message::json, ${seq}
          FROM unnest(${indexes}::integer[], ${texts}::text[]) AS m(idx, message)`
      },
      { discard: true }
    )

  /**
   * Appends a change (its lock held): one statement, so one round trip and atomic, committed
   * before it returns. The messages from the change's first one are written over their rows, the
   * rows past the new end deleted, and `seq` moves on.
   */
  const appendChange = Effect.fnUntraced(function* (
    sessionId: string,
    patch: HistoryPatch,
    next: Record<string, unknown>
  ) {
    const changed = patch.set !== undefined && Object.keys(patch.set).length > 0
    const { fields, messagesAt } = fieldsOf(next)
    const count = patch.keep + patch.messages.length
    const indexes = patch.messages.map((_, i) => patch.keep + i)
    const texts = patch.messages.map((m) => JSON.stringify(m))
    const rows = yield* q(
      historyFile(sessionId),
      "append to",
      sql<{ readonly seq: string; readonly modified_at: Date }>`
          WITH head AS (
            UPDATE ctxo_histories
            SET seq = nextval('ctxo_history_seq'), message_count = ${count}, modified_at = now(),
              fields = CASE WHEN ${changed} THEN ${JSON.stringify(fields)}::json ELSE fields END,
              messages_at = CASE WHEN ${changed} THEN ${messagesAt} ELSE messages_at END
            WHERE tenant = ${tenant} AND session_id = ${sessionId} AND raw IS NULL
            RETURNING seq, modified_at
          ), gone AS (
            DELETE FROM ctxo_history_messages
            WHERE tenant = ${tenant} AND session_id = ${sessionId} AND idx >= ${count}
              AND EXISTS (SELECT 1 FROM head)
          ), put AS (
            INSERT INTO ctxo_history_messages (tenant, session_id, idx, message, written_seq)
            SELECT ${tenant}, ${sessionId}, m.idx, m.message::json, head.seq
            FROM head, unnest(${indexes}::integer[], ${texts}::text[]) AS m(idx, message)
            ON CONFLICT (tenant, session_id, idx) DO UPDATE
              SET message = excluded.message, written_seq = excluded.written_seq
          )
          SELECT seq, modified_at FROM head`
    )
    return rows[0] === undefined
      ? undefined
      : { seq: Number(rows[0].seq), modifiedAt: rows[0].modified_at.toISOString() }
  })

  const readHistoryText = (sessionId: string) => Effect.map(loadHistory(sessionId), (entry) => entry?.text)

  // --- reads for the compiler
  const cleanFor = (scope: "global" | "session", path: string) =>
    scope === "global" ? fromEither(cleanGlobalPath(path)) : checkPath(path)
  const read = Effect.fnUntraced(function* (scope: "global" | "session", sessionId: string, path: string) {
    const clean = yield* cleanFor(scope, path)
    if (scope === "global") return (yield* globalRow(clean))?.text
    yield* checkSessionId(sessionId)
    const refused = readRefusal(clean)
    if (refused !== undefined) return yield* refused
    if (clean === HISTORY_FILE) return yield* readHistoryText(sessionId)
    return (yield* fileRow(sessionId, clean))?.text
  })
  const readMany = Effect.fnUntraced(function* (
    scope: "global" | "session",
    sessionId: string,
    paths: ReadonlyArray<string>
  ) {
    const cleans: Array<string> = []
    for (const path of paths) {
      const clean = yield* cleanFor(scope, path)
      if (scope === "session") {
        yield* checkSessionId(sessionId)
        const refused = readRefusal(clean)
        if (refused !== undefined) return yield* refused
      }
      cleans.push(clean)
    }
    const wanted = cleans.filter((c) => scope === "global" || c !== HISTORY_FILE)
    const rows =
      wanted.length === 0
        ? []
        : scope === "global"
          ? yield* q(
              "(global files)",
              "read",
              sql<{ readonly path: string; readonly content: Uint8Array }>`
                  SELECT name AS path, content FROM ctxo_global_files
                  WHERE tenant = ${tenant} AND name = ANY(${wanted}::text[])`
            )
          : yield* q(
              sessionId,
              "read",
              sql<{ readonly path: string; readonly content: Uint8Array }>`
                  SELECT path, content FROM ctxo_files
                  WHERE tenant = ${tenant} AND session_id = ${sessionId} AND path = ANY(${wanted}::text[])`
            )
    const texts = new Map(rows.map((r) => [r.path, byteText(r.content)]))
    const history =
      scope === "session" && cleans.includes(HISTORY_FILE) ? yield* readHistoryText(sessionId) : undefined
    return cleans.map((c) => (scope === "session" && c === HISTORY_FILE ? history : texts.get(c)))
  })
  const listSession = Effect.fnUntraced(function* (sessionId: string) {
    yield* checkSessionId(sessionId)
    const rows = yield* q(
      sessionId,
      "list",
      sql<{ readonly path: string }>`
          SELECT path FROM ctxo_files WHERE tenant = ${tenant} AND session_id = ${sessionId}
          UNION ALL
          SELECT ${HISTORY_FILE} FROM ctxo_histories WHERE tenant = ${tenant} AND session_id = ${sessionId}`
    )
    return sorted(rows.map((r) => r.path).filter(listed))
  })
  const listGlobal = Effect.map(
    q(
      "(global files)",
      "list",
      sql<{ readonly name: string }>`SELECT name FROM ctxo_global_files WHERE tenant = ${tenant}`
    ),
    (rows) =>
      sorted(
        rows.map((r) => r.name).filter((n) => !isRootIndexFile(n) && !n.startsWith(".") && !isTempFile(n))
      )
  )

  // --- the root's files (memory, the knowledge index): one row each
  const rootFile = (name: string) =>
    Effect.map(
      q(
        name,
        "read",
        sql<{ readonly content: string }>`
          SELECT content FROM ctxo_root_files WHERE tenant = ${tenant} AND name = ${name}`
      ),
      (rows) => rows[0]?.content
    )
  const decodedOnce = <A>(decode: (text: string, file: string) => Either.Either<A, StoreError>) => {
    const seen = new Map<string, { readonly text: string; readonly value: A }>()
    return (key: string, text: string, file: string) => {
      const hit = seen.get(key)
      if (hit?.text === text) return Effect.succeed(hit.value)
      return Effect.map(fromEither(decode(text, file)), (value) => {
        seen.delete(key)
        seen.set(key, { text, value })
        if (seen.size > 1024) seen.delete(seen.keys().next().value!)
        return value
      })
    }
  }
  const memoryOf = decodedOnce(decodeMemory)
  const readGlobalMemory = Effect.flatMap(rootFile(GLOBAL_MEMORY_FILE), (text) =>
    text === undefined
      ? Effect.succeed([] as ReadonlyArray<MemoryEntry>)
      : memoryOf("", text, GLOBAL_MEMORY_FILE)
  )
  const readSessionMemory = (sessionId: string) =>
    Effect.flatMap(fileRow(sessionId, MEMORY_FILE), (row) =>
      row === undefined
        ? Effect.succeed([] as ReadonlyArray<MemoryEntry>)
        : memoryOf(sessionId, row.text, `${sessionId}/${MEMORY_FILE}`)
    )

  /** `updateHistory` under the session's lock: a generator made once (V8 keeps what one made per call closes over until a full collection). */
  function* updatingHistory<A, E>(
    sessionId: string,
    f: (json: unknown) => Effect.Effect<readonly [A, HistoryPatch | undefined], E>
  ) {
    yield* checkSessionId(sessionId)
    const current = yield* loadHistory(sessionId)
    const json = current?.json
    const [value, patch] = yield* f(json)
    if (patch === undefined) {
      yield* requireSession(sessionId)
      return [value, json] as const
    }
    // The patch as a reader of its JSON text gets it, applied.
    const applied = applyPatch(json, JSON.parse(JSON.stringify(patch)) as HistoryPatch)
    if (Either.isLeft(applied))
      return yield* Effect.dieMessage(`history patch of ${sessionId} does not fit: ${applied.left}`)
    const next = applied.right
    const messages = next.messages as ReadonlyArray<unknown>
    const written =
      current?.messages !== undefined
        ? yield* appendChange(sessionId, patch, next)
        : yield* putHistory(sessionId, next, undefined)
    if (written === undefined) {
      // Rewritten whole meanwhile (not by a holder of the lock): read again, write whole.
      histories.delete(sessionId)
      return yield* Effect.dieMessage(`the history of ${sessionId} changed under its lock`)
    }
    remember(sessionId, {
      seq: written.seq,
      json: next,
      text: jsonText(next),
      messages,
      modifiedAt: written.modifiedAt
    })
    return [value, next as unknown] as const
  }

  const updatingMemory = memoryUpdater({
    getSession,
    readSessionMemory,
    writeMemory: (sessionId, text) => putFile(sessionId, MEMORY_FILE, text)
  })

  const service: Service = {
    root,
    scope: Effect.succeed(root),
    cache,
    listSessions: Effect.map(sessionRows, (rows) => rows.map(recordOf)),
    createSession: (input) => {
      const id = input.id ?? `s-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`
      return Effect.gen(function* () {
        yield* checkSessionId(id)
        return yield* withSessionLock(
          id,
          Effect.gen(function* () {
            if ((yield* globalRow(id)) !== undefined)
              return yield* new PathRefused({ path: id, reason: "a file of the data root has this name" })
            const record = newRecord(id, input.concept, input.metadata, new Date().toISOString())
            const rows = yield* q(
              id,
              "create",
              sql<{ readonly id: string }>`
                INSERT INTO ctxo_sessions (tenant, id, concept, created_at, state, state_changed_at, metadata)
                VALUES (${tenant}, ${id}, ${record.concept}, ${record.createdAt}, ${record.state},
                  ${record.stateChangedAt}, ${JSON.stringify(record.metadata)}::json)
                ON CONFLICT (tenant, id) DO NOTHING
                RETURNING id`
            )
            if (rows.length === 0) return yield* new SessionExists({ sessionId: id })
            histories.delete(id)
            return record
          })
        )
      })
    },
    getSession,
    updateSession: (id, patch) =>
      withSessionLock(
        id,
        Effect.gen(function* () {
          const current = yield* getSession(id)
          const next = patchRecord(current, patch, new Date().toISOString())
          yield* q(
            id,
            "update",
            sql`
              UPDATE ctxo_sessions
              SET concept = ${next.concept}, state = ${next.state}, state_changed_at = ${next.stateChangedAt},
                metadata = ${JSON.stringify(next.metadata)}::json
              WHERE tenant = ${tenant} AND id = ${id}`
          )
          return next
        })
      ),
    deleteSession: (id) =>
      withSessionLock(
        id,
        Effect.gen(function* () {
          yield* getSession(id)
          // Its files, history and messages go with it (ON DELETE CASCADE), in one statement.
          yield* q(id, "delete", sql`DELETE FROM ctxo_sessions WHERE tenant = ${tenant} AND id = ${id}`)
          histories.delete(id)
        })
      ),
    listFiles: (sessionId) =>
      Effect.gen(function* () {
        yield* getSession(sessionId)
        const rows = yield* q(
          sessionId,
          "list",
          sql<{
            readonly path: string
            readonly size: number
            readonly version: string
            readonly modified_at: Date
          }>`
            SELECT path, size, version, modified_at FROM ctxo_files
            WHERE tenant = ${tenant} AND session_id = ${sessionId}`
        )
        const files: Array<FileInfo> = rows
          .filter((r) => listed(r.path))
          .map((r) => ({
            path: r.path,
            size: r.size,
            version: r.version,
            modifiedAt: r.modified_at.toISOString()
          }))
        const history = yield* loadHistory(sessionId)
        if (history?.text !== undefined) files.push(infoOf(HISTORY_FILE, history.text, history.modifiedAt))
        return files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
      }),
    readFile: (sessionId, path, range) =>
      Effect.gen(function* () {
        if (sessionId === undefined) {
          const clean = yield* fromEither(cleanGlobalPath(path))
          const row = yield* globalRow(clean)
          if (row === undefined) return yield* new FileNotFound({ path: clean })
          return yield* fromEither(contentOf(clean, row.text, row.modifiedAt, range))
        }
        yield* getSession(sessionId)
        const clean = yield* checkPath(path)
        const refused = readRefusal(clean)
        if (refused !== undefined) return yield* refused
        const row =
          clean === HISTORY_FILE
            ? yield* Effect.map(loadHistory(sessionId), (h) =>
                h?.text === undefined ? undefined : { text: h.text, modifiedAt: h.modifiedAt }
              )
            : yield* fileRow(sessionId, clean)
        if (row === undefined) return yield* new FileNotFound({ path: clean })
        return yield* fromEither<FileContent, StoreError>(contentOf(clean, row.text, row.modifiedAt, range))
      }),
    writeFile: (sessionId, path, content, options = {}) =>
      withSessionLock(
        sessionId,
        Effect.gen(function* () {
          yield* getSession(sessionId)
          const clean = yield* checkPath(path)
          const refused = writeRefusal(clean, options)
          if (refused !== undefined) return yield* refused
          const current = yield* fileRow(sessionId, clean)
          const next = yield* fromEither(nextText(clean, current?.text, content, options))
          if (current === undefined) yield* pathConflict(sessionId, clean)
          const modifiedAt = yield* putFile(sessionId, clean, next)
          return infoOf(clean, next, modifiedAt)
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
          const current = yield* fileRow(sessionId, clean)
          if (current === undefined) return yield* new FileNotFound({ path: clean })
          const conflict = versionCheck(clean, current.text, ifMatch)
          if (conflict !== undefined) return yield* conflict
          yield* q(
            `${sessionId}/${clean}`,
            "delete",
            sql`DELETE FROM ctxo_files WHERE tenant = ${tenant} AND session_id = ${sessionId} AND path = ${clean}`
          )
        })
      ),
    withSessionLock,
    hasSession: (sessionId) => Effect.zipRight(checkSessionId(sessionId), sessionExists(sessionId)),
    read,
    readMany,
    list: (scope, sessionId) => (scope === "global" ? listGlobal : listSession(sessionId)),
    readHistory: (sessionId) => read("session", sessionId, HISTORY_FILE),
    writeHistory: (sessionId, text) =>
      withSessionLock(
        sessionId,
        Effect.gen(function* () {
          yield* checkSessionId(sessionId)
          let json: unknown
          let parsed = true
          try {
            json = JSON.parse(text)
          } catch {
            parsed = false
          }
          const plain = parsed ? Either.getOrThrow(foldJournal(json, [])).json : undefined
          const structured = parsed && isObject(plain) && Array.isArray(plain.messages)
          const written = yield* putHistory(sessionId, plain, structured ? undefined : text)
          histories.delete(sessionId)
          if (structured)
            remember(sessionId, {
              seq: written.seq,
              json: plain,
              text: jsonText(plain),
              messages: (plain as Record<string, unknown>).messages as ReadonlyArray<unknown>,
              modifiedAt: written.modifiedAt
            })
        })
      ),
    readHistoryJson: Effect.fnUntraced(function* (sessionId: string) {
      yield* checkSessionId(sessionId)
      return (yield* loadHistory(sessionId))?.json
    }),
    updateHistory: <A, E>(
      sessionId: string,
      f: (json: unknown) => Effect.Effect<readonly [A, HistoryPatch | undefined], E>
    ) =>
      withSessionLock(
        sessionId,
        Effect.gen(() => updatingHistory(sessionId, f))
      ),
    writeToolResult: (sessionId, callId, text) =>
      withSessionLock(
        sessionId,
        Effect.gen(function* () {
          yield* checkSessionId(sessionId)
          const path = toolResultPath(callId)
          yield* putFile(sessionId, path, text)
          return path
        })
      ),
    readToolResult: (sessionId, callId) => read("session", sessionId, toolResultPath(callId)),
    readTasks: (sessionId) =>
      Effect.gen(function* () {
        yield* getSession(sessionId)
        const row = yield* fileRow(sessionId, TASKS_FILE)
        if (row === undefined) return []
        return yield* fromEither(decodeTasks(row.text, `${sessionId}/${TASKS_FILE}`))
      }),
    writeTasks: (sessionId, tasks) =>
      withSessionLock(
        sessionId,
        Effect.gen(function* () {
          yield* getSession(sessionId)
          yield* putFile(sessionId, TASKS_FILE, jsonText(tasks))
        })
      ),
    readMemory: (sessionId) => Effect.zipRight(getSession(sessionId), readSessionMemory(sessionId)),
    updateMemory: (sessionId, update) => withSessionLock(sessionId, updatingMemory(sessionId, update)),
    readGlobalMemory,
    updateGlobalMemory: (update) =>
      // One transaction holding the row: processes changing the root's memory take turns.
      q(
        GLOBAL_MEMORY_FILE,
        "update",
        sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`
              INSERT INTO ctxo_root_files (tenant, name, content) VALUES (${tenant}, ${GLOBAL_MEMORY_FILE}, '[]')
              ON CONFLICT (tenant, name) DO NOTHING`
            const rows = yield* sql<{ readonly content: string }>`
              SELECT content FROM ctxo_root_files WHERE tenant = ${tenant} AND name = ${GLOBAL_MEMORY_FILE}
              FOR UPDATE`
            const before = yield* memoryOf("", rows[0]!.content, GLOBAL_MEMORY_FILE)
            const after = update(before)
            if (after !== before)
              yield* sql`
                UPDATE ctxo_root_files SET content = ${jsonText(after)}, modified_at = now()
                WHERE tenant = ${tenant} AND name = ${GLOBAL_MEMORY_FILE}`
            return after
          })
        )
      ),
    readRun: (sessionId, runId) =>
      Effect.gen(function* () {
        yield* getSession(sessionId)
        const row = RUN_ID.test(runId) ? yield* fileRow(sessionId, runPath(runId)) : undefined
        if (row === undefined) return yield* new RunNotFound({ sessionId, runId })
        return yield* fromEither(decodeRun(row.text, `${sessionId}/${runPath(runId)}`))
      }),
    writeRun: (state) =>
      Effect.gen(function* () {
        if (!RUN_ID.test(state.runId))
          return yield* new PathRefused({ path: state.runId.slice(0, 120), reason: "not a run id" })
        yield* getSession(state.sessionId)
        yield* putFile(state.sessionId, runPath(state.runId), jsonText(state))
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
    readKnowledgeIndex: rootFile(KNOWLEDGE_INDEX_FILE),
    writeKnowledgeIndex: (text) =>
      q(
        KNOWLEDGE_INDEX_FILE,
        "write",
        sql`
          INSERT INTO ctxo_root_files (tenant, name, content) VALUES (${tenant}, ${KNOWLEDGE_INDEX_FILE}, ${text})
          ON CONFLICT (tenant, name) DO UPDATE SET content = excluded.content, modified_at = now()`
      ).pipe(Effect.asVoid),
    listDistributions: Effect.gen(function* () {
      const rows = yield* q(
        "(distributions)",
        "read",
        sql<{ readonly body: unknown }>`
          SELECT body FROM ctxo_distributions WHERE tenant = ${tenant} ORDER BY position`
      )
      return yield* Effect.forEach(rows, (row, i) =>
        Either.match(decodeDistribution(row.body), {
          onLeft: () =>
            Effect.fail(
              new CorruptFile({ path: "(distributions)", reason: `[${i}]: not a task distribution` })
            ),
          onRight: Effect.succeed
        })
      )
    }),
    putDistribution: (distribution) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            yield* sql`
              INSERT INTO ctxo_distributions (tenant, id, idempotency_key, body)
              VALUES (${tenant}, ${distribution.id}, ${distribution.idempotencyKey ?? null},
                ${JSON.stringify(distribution)}::json)
              ON CONFLICT (tenant, id) DO UPDATE
                SET body = excluded.body, idempotency_key = excluded.idempotency_key`
            // The newest MAX_DISTRIBUTIONS are kept.
            yield* sql`
              DELETE FROM ctxo_distributions WHERE tenant = ${tenant} AND position <= (
                SELECT position FROM ctxo_distributions WHERE tenant = ${tenant}
                ORDER BY position DESC OFFSET ${MAX_DISTRIBUTIONS} LIMIT 1)`
          })
        )
        .pipe(
          Effect.catchTag("SqlError", (e) =>
            Effect.fail(
              violates(e, "ctxo_distributions_tenant_idempotency_key_key")
                ? // Another process took the key first: its distribution is the one for the key.
                  new VersionConflict({
                    path: `distribution key ${(distribution.idempotencyKey ?? "").slice(0, 120)}`,
                    expected: "(none)",
                    actual: "another distribution"
                  })
                : ioError("(distributions)", "write")(e)
            )
          )
        ),
    cleanTemporaryFiles: Effect.succeed(0),
    flush: Effect.void
  }
  return service
}

/**
 * `doc`'s fields other than `messages` (in their order, `journalSeq` left out) and how many come
 * before `messages`.
 */
const fieldsOf = (doc: Record<string, unknown>) => {
  const fields: Record<string, unknown> = {}
  let messagesAt = 0
  let seen = false
  for (const [key, value] of Object.entries(doc)) {
    if (key === "messages") {
      seen = true
      continue
    }
    if (key === JOURNAL_SEQ || value === undefined) continue
    fields[key] = value
    if (!seen) messagesAt++
  }
  return { fields, messagesAt }
}

/** The document from its fields with `messages` at its place among them. */
const documentOf = (
  fields: Record<string, unknown>,
  messagesAt: number,
  messages: ReadonlyArray<unknown>
): Record<string, unknown> => {
  const doc: Record<string, unknown> = {}
  const entries = Object.entries(fields)
  entries.forEach(([key, value], i) => {
    if (i === messagesAt) doc.messages = messages
    doc[key] = value
  })
  if (!Object.hasOwn(doc, "messages")) doc.messages = messages
  return doc
}

/** The store of one tenant on the `Database`. */
export const layer = (options: PgStoreOptions): Layer.Layer<Store, never, Database> =>
  Layer.effect(Store, make(options))

/** A session's record as it was, and a global file, for moving a data root into the database. */
export const importerWith = (db: Database["Type"], tenant: string): Importer => {
  const { sql } = db
  const io = (path: string) => (e: SqlError) =>
    new StoreIOError({
      path,
      operation: "import",
      reason: `the database: ${e.cause instanceof Error ? e.cause.message : e.message}`.slice(0, 300)
    })
  return {
    putRecord: (record) =>
      Effect.zipRight(
        checkSessionId(record.id),
        sql`
          INSERT INTO ctxo_sessions (tenant, id, concept, created_at, state, state_changed_at, metadata)
          VALUES (${tenant}, ${record.id}, ${record.concept}, ${record.createdAt}, ${record.state},
            ${record.stateChangedAt}, ${JSON.stringify(record.metadata)}::json)`.pipe(
          Effect.mapError((e) =>
            violates(e, "ctxo_sessions_pkey") ? new SessionExists({ sessionId: record.id }) : io(record.id)(e)
          ),
          Effect.asVoid
        )
      ),
    putGlobalFile: (name, text) =>
      Effect.flatMap(fromEither(cleanGlobalPath(name)), (clean) =>
        sql`
          INSERT INTO ctxo_global_files (tenant, name, content) VALUES (${tenant}, ${clean}, ${Buffer.from(text, "utf8")})
          ON CONFLICT (tenant, name) DO UPDATE SET content = excluded.content, modified_at = now()`.pipe(
          Effect.mapError(io(clean)),
          Effect.asVoid
        )
      )
  }
}

/** The tenants that have rows in the database (sessions or global files), sorted. */
export const tenants = Effect.flatMap(Database, ({ sql }) =>
  sql<{ readonly tenant: string }>`
    SELECT tenant FROM ctxo_sessions UNION SELECT tenant FROM ctxo_global_files
    UNION SELECT tenant FROM ctxo_root_files UNION SELECT tenant FROM ctxo_distributions
    ORDER BY tenant`.pipe(Effect.map((rows) => rows.map((r) => r.tenant)))
)
