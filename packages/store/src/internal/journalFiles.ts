/**
 * The file store's history: `messages.json` and its journal `messages.journal` (the format is
 * `HistoryJournal.ts`), one owner per store.
 *
 * - A change is one record appended to the journal under the session's lock, then made durable
 *   with one fdatasync outside it: changes of the same journal that arrive while an fdatasync runs
 *   share the next one (group commit). The caller is answered once its record is on disk.
 * - What a session holds is kept in memory with the stamps (device, inode, time, size) of both
 *   files: while neither changed, reading it is two `stat`s. Another process appending or folding
 *   changes a stamp, and the files are read again (the journal first, then messages.json, so a
 *   fold between the two reads shows as records messages.json already holds).
 * - A torn last line is left out when read and cut off before the next append.
 * - A fold writes the whole document into messages.json (atomically, with `journalSeq`, the last
 *   record it holds), then removes the journal, one fold at a time, and for every journal when the
 *   store is flushed (released). Once the journal passes `foldRecords` or `foldBytes`, it runs:
 *   - at the first record a lock span appends (a turn's input), in the background under that
 *     span's lock while the span goes on (a turn compiles and waits for its model meanwhile): the
 *     span's next record, any read of the history and the session's next lock span wait for it.
 *     A fold after the turn instead held up the session's next turn: 8.5-10.6 ms once in 128
 *     turns for a client that sends its next step at once (the turn bench);
 *   - for a record appended outside a lock span, in the background under the session's lock;
 *   - for another record of a span (a turn's tool step or answer), once the session has been
 *     quiet for `foldDelayMs` (no span holding or waiting for its lock, none appending a record),
 *     under the lock, if no span folded meanwhile: the next span's first record folds it otherwise.
 * - Past `maxJournaled` sessions with a journal, one worker folds the least recently appended ones,
 *   one at a time, each once quiet: what the store keeps of a session until its fold (that it must
 *   fold it, its journal's file, its last span) is bounded however many sessions it serves.
 */
import { fstatSync, ftruncateSync, writeSync } from "node:fs"
import type { FileHandle } from "node:fs/promises"
import { join } from "node:path"
import { Cause, Deferred, Effect, Either, Exit, FiberId, FiberRef, HashMap, List } from "effect"
import {
  applyPatch,
  foldJournal,
  type HistoryPatch,
  type JournalLines,
  type JournalProblem,
  jsonExact,
  readJournal,
  recordLine,
  withJournalSeq
} from "../HistoryJournal.ts"
import { deferredSyncs } from "../HistorySync.ts"
import { checkSessionId, HISTORY_FILE, HISTORY_JOURNAL } from "../Paths.ts"
import { jsonText } from "../Records.ts"
import * as SessionCache from "../SessionCache.ts"
import { withSpan } from "../Spans.ts"
import {
  CorruptFile,
  HistoryJournalCorrupt,
  PathRefused,
  SessionNotFound,
  type StoreError
} from "../StoreErrors.ts"
import {
  errnoOf,
  isDirectoryNow,
  OutsideError,
  openForAppend,
  type ReadResult,
  readInside,
  stampNow,
  stampOf,
  unlinkInside
} from "./safeFs.ts"

export interface JournalOptions {
  /** A journal with this many records is folded into messages.json (default 256). */
  readonly foldRecords?: number
  /** A journal of this many bytes is folded into messages.json (default 1 MiB). */
  readonly foldBytes?: number
  /**
   * How long the session must be quiet before a fold that came due in the middle of a lock span is
   * made under the lock (default 200 ms, at least 10: it is looked at that often while busy); the
   * session's next span folds it at its first record otherwise.
   */
  readonly foldDelayMs?: number
  /**
   * Sessions with a journal this store appended to and has not folded, at most (default 1,024):
   * beyond it, the least recently appended one is folded once it is quiet. Until its fold, the store
   * keeps a few entries for such a session (that it must fold it on shutdown, its journal's file, its
   * last record's lock span); without a bound, a gateway serving many sessions a few turns each kept
   * them for every session since it started.
   */
  readonly maxJournaled?: number
}

export const DEFAULT_FOLD_RECORDS = 256
export const DEFAULT_FOLD_BYTES = 1024 * 1024
export const DEFAULT_FOLD_DELAY_MS = 200
/** About what a gateway's release folds in its 5 seconds (each fold writes messages.json, durably). */
export const DEFAULT_MAX_JOURNALED = 1024

/** What the store lends: its root, rules, lock and atomic writes. */
export interface JournalDeps {
  /** The store's root as its sessions' scope in the session cache. */
  readonly scope: string
  /** The store's session cache, which its history states are kept in. */
  readonly cache: SessionCache.Service
  readonly ready: Effect.Effect<string, StoreError>
  /** Where a session's files may really be (its directory, checked on the opened file). */
  readonly allowed: (base: string, sessionId: string) => (real: string) => boolean
  readonly withSessionLock: <A, E, R>(
    sessionId: string,
    effect: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E, R>
  /** `effect` as a fiber that holds no session lock (a fold forked from a turn waits for the turn's). */
  readonly withoutLocks: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /**
   * The lock span the caller is in for the session (the same object for the span's records, but
   * for those made inside another session's lock taken within it), or undefined when it does not
   * hold the session's lock.
   */
  readonly lockSpan: (sessionId: string) => Effect.Effect<object | undefined>
  /** Whether a span holds the session's lock or waits for it. */
  readonly busy: (sessionId: string) => boolean
  /** An atomic write of a file of an existing session (SessionNotFound when its directory is gone). */
  readonly writeSessionFile: (
    sessionId: string,
    clean: string,
    text: string
  ) => Effect.Effect<void, StoreError>
  readonly io: (path: string, operation: string) => (e: unknown) => StoreError
}

/** What a session's history files hold, as read (or as this store last wrote them). */
interface HistoryState {
  readonly stampM: string | undefined
  readonly stampJ: string | undefined
  /** The journal's inode; undefined when there is no journal. */
  readonly journalIno: number | undefined
  /** Records of the journal that messages.json does not hold yet (what a fold writes). */
  readonly records: number
  /** The journal's bytes up to its last good record; its size, more when a torn line follows. */
  readonly validBytes: number
  readonly journalBytes: number
  /** What the history weighs as stored: messages.json's text and the journal (the session cache's size). */
  readonly bytes: number
  /** The document (undefined: no history) without `journalSeq`, and the last record it holds. */
  readonly current: () => Either.Either<{ readonly json: unknown; readonly seq: number }, StoreError>
  /** messages.json's text as a fold would write it now (undefined: no history). */
  readonly text: () => string | undefined
}

/**
 * A state's `current` and `text`, made here and not inline: a closure made inside `append` or a fold
 * keeps the whole scope it was made in, and that scope holds the state before it, whose closures
 * held the one before that: every earlier document of the session stayed in memory (20 MB over
 * 10,000 requests in the gateway's memory bench).
 */
const always =
  <A>(value: A): (() => A) =>
  () =>
    value
const currentOf = (json: unknown, seq: number): HistoryState["current"] => always(Either.right({ json, seq }))

/** The journal's fields of a state when there is no journal. */
const noJournal: Pick<HistoryState, "stampJ" | "journalIno" | "validBytes" | "journalBytes"> = {
  stampJ: undefined,
  journalIno: undefined,
  validBytes: 0,
  journalBytes: 0
}

/**
 * A history state, its fields always in this order: one shape for every state (read, appended,
 * folded), so code that reads states keeps its optimized form when a session's first read or a
 * fold makes one.
 */
const historyState = (
  stampM: string | undefined,
  journal: Pick<HistoryState, "stampJ" | "journalIno" | "validBytes" | "journalBytes">,
  records: number,
  bytes: number,
  current: HistoryState["current"],
  text: HistoryState["text"]
): HistoryState => ({
  stampM,
  stampJ: journal.stampJ,
  journalIno: journal.journalIno,
  records,
  validBytes: journal.validBytes,
  journalBytes: journal.journalBytes,
  bytes,
  current,
  text
})
const textOf = (json: unknown, seq: number) => memo(() => jsonText(withJournalSeq(json, seq)))

const memo = <A>(f: () => A): (() => A) => {
  let done = false
  let value: A
  return () => {
    if (!done) {
      value = f()
      done = true
    }
    return value
  }
}

/**
 * Journals kept between appends, at most: the least recently used idle ones beyond it are closed
 * and forgotten (the next append opens the journal again).
 */
const MAX_OPEN = 64

/**
 * A journal file (one inode) and its durability: records written (`written`) and known to be on
 * disk (`durable`), and the one fdatasync running. Its handle stays open between appends; it is
 * closed once nobody uses it after `close` (the journal folded or gone, the store flushed, too many
 * open), and opened again by the next append.
 */
class JournalFile {
  handle: FileHandle | undefined = undefined
  written: number
  private durable: number
  private refs = 0
  private closing = false
  private running: Promise<void> | undefined = undefined
  private failure: { readonly error: unknown } | undefined = undefined
  constructor(
    readonly ino: number,
    seq: number
  ) {
    this.written = seq
    this.durable = seq
  }
  use(handle: FileHandle) {
    this.handle = handle
  }
  get idle() {
    return this.refs === 0 && this.running === undefined
  }
  acquire() {
    this.refs++
    this.closing = false
  }
  release() {
    this.refs--
    this.closeIfAsked()
  }
  /** Records up to `seq` are on disk by other means (a fold wrote them into messages.json). */
  settle(seq: number) {
    this.durable = Math.max(this.durable, seq)
  }
  /** Closes the handle once nobody uses it. */
  close() {
    this.closing = true
    this.closeIfAsked()
  }
  private closeIfAsked() {
    if (!this.closing || !this.idle || this.handle === undefined) return
    const handle = this.handle
    this.handle = undefined
    handle.close().catch(() => {})
  }
  /**
   * Resolves once the records up to `seq` are on disk. One fdatasync at a time: those who arrive
   * while it runs wait for it, then share the next one (which covers everything written by then).
   * The caller holds a reference, so the handle is open.
   */
  async until(seq: number): Promise<void> {
    for (;;) {
      if (this.failure !== undefined) throw this.failure.error
      if (this.durable >= seq) return
      if (this.running === undefined) {
        const upTo = this.written
        this.running = this.handle!.datasync()
          .then(
            () => {
              this.durable = Math.max(this.durable, upTo)
            },
            (error: unknown) => {
              this.failure = { error }
            }
          )
          .finally(() => {
            this.running = undefined
            this.closeIfAsked()
          })
      }
      await this.running
    }
  }
}

/** `text` with `journalSeq` set when it is a JSON object and records were folded before it. */
const textWithSeq = (text: string, seq: number): string => {
  if (seq === 0) return text
  try {
    const json: unknown = JSON.parse(text)
    return typeof json === "object" && json !== null && !Array.isArray(json)
      ? jsonText(withJournalSeq(json, seq))
      : text
  } catch {
    return text
  }
}

const fromEither = <A, E>(either: Either.Either<A, E>): Effect.Effect<A, E> =>
  Either.match(either, { onLeft: Effect.fail, onRight: Effect.succeed })

export const makeJournalFiles = (deps: JournalDeps, options: JournalOptions = {}) => {
  const foldRecords = options.foldRecords ?? DEFAULT_FOLD_RECORDS
  const foldBytes = options.foldBytes ?? DEFAULT_FOLD_BYTES
  const foldDelay = options.foldDelayMs ?? DEFAULT_FOLD_DELAY_MS
  const maxJournaled = options.maxJournaled ?? DEFAULT_MAX_JOURNALED
  // In the store's session cache, its budget of bytes: a long session's JSON is large.
  const cache = deps.cache
  const states = cache.holder<HistoryState>("store history state")
  const keyOf = (sessionId: string) => SessionCache.keyOf(deps.scope, sessionId)
  const files = new Map<string, JournalFile>()
  /**
   * Sessions this store appended to since their last fold, with when they last did
   * (`performance.now()`), the least recently appended first.
   */
  const journaled = new Map<string, number>()
  /** Whether the worker folding past `maxJournaled` runs (`foldBeyondBound`). */
  let boundWorker = false
  /** Folds asked for in the background (waiting for the session's lock, or holding it). */
  const folding = new Map<string, Deferred.Deferred<void>>()
  /** Folds running under a lock span's lock while the span goes on. */
  const inSpan = new Map<string, Deferred.Deferred<void>>()
  /**
   * The lock span of each session's last record (a span's first record is the one that folds), by a
   * number: the span's object is the set of locks its fiber holds, which must not outlive the span.
   */
  const lastSpan = new Map<string, number>()
  const spanNumbers = new WeakMap<object, number>()
  let spans = 0
  const numberOf = (span: object) => {
    let n = spanNumbers.get(span)
    if (n === undefined) {
      n = ++spans
      spanNumbers.set(span, n)
    }
    return n
  }
  const foldLock = Effect.unsafeMakeSemaphore(1)
  const isDue = (state: { readonly records: number; readonly validBytes: number }) =>
    state.records >= foldRecords || state.validBytes >= foldBytes

  const remember = (sessionId: string, state: HistoryState) => {
    const key = keyOf(sessionId)
    states.set(key, state)
    cache.sized(key, state.bytes)
  }
  const attempt = <A>(path: string, operation: string, f: () => Promise<A>) =>
    Effect.tryPromise({ try: f, catch: deps.io(path, operation) })
  const journalName = (sessionId: string) => `${sessionId}/${HISTORY_JOURNAL}`

  /** The state of what was read: messages.json (`m`) and the journal (`j`). */
  const stateOf = (
    sessionId: string,
    m: ReadResult,
    j: ReadResult
  ): Either.Either<HistoryState, StoreError> => {
    const baseText = m._tag === "Read" ? m.text : undefined
    const parseBase = (): Either.Either<unknown, StoreError> => {
      if (baseText === undefined) return Either.right(undefined)
      try {
        return Either.right(JSON.parse(baseText))
      } catch (e) {
        const reason = e instanceof Error ? e.message.replace(/\s+/g, " ").slice(0, 120) : "syntax error"
        return Either.left(
          new CorruptFile({
            path: `${sessionId}/${HISTORY_FILE}`,
            reason: `(root): not valid JSON (${reason})`
          })
        )
      }
    }
    const stampM = m._tag === "Read" ? m.stamp : undefined
    const lines: Either.Either<JournalLines, JournalProblem> =
      j._tag === "Read" ? readJournal(j.text) : Either.right({ records: [], validBytes: 0, torn: false })
    if (Either.isLeft(lines))
      return Either.left(new HistoryJournalCorrupt({ path: journalName(sessionId), ...lines.left }))
    const journal =
      j._tag === "Read"
        ? { stampJ: j.stamp, journalIno: j.ino, journalBytes: j.size, validBytes: lines.right.validBytes }
        : noJournal
    const records = lines.right.records
    const bytes = (baseText?.length ?? 0) + journal.journalBytes
    /** messages.json parsed and `withRecords` applied to it. */
    const foldedWith = (withRecords: typeof records) =>
      Either.flatMap(parseBase(), (base) =>
        Either.mapLeft(
          foldJournal(base, withRecords),
          (p) => new HistoryJournalCorrupt({ path: journalName(sessionId), ...p })
        )
      )
    if (records.length === 0)
      // messages.json alone: parsed only when asked for (its text is handed on as it is).
      return Either.right(
        historyState(
          stampM,
          journal,
          0,
          bytes,
          memo(() => Either.map(foldedWith([]), ({ json, seq }) => ({ json, seq }))),
          always(baseText)
        )
      )
    const folded = foldedWith(records)
    if (Either.isLeft(folded)) return Either.left(folded.left)
    const { json, seq, applied } = folded.right
    return Either.right(
      historyState(
        stampM,
        journal,
        applied,
        bytes,
        currentOf(json, seq),
        applied === 0 ? always(baseText) : textOf(json, seq)
      )
    )
  }

  /**
   * What the session's history files hold, once a fold of them running in a lock span is done
   * (`own`: the fold's own read).
   */
  const readState = Effect.fnUntraced(function* (sessionId: string, own = false) {
    const running = own ? undefined : inSpan.get(sessionId)
    if (running !== undefined) yield* Deferred.await(running)
    const base = yield* deps.ready
    const dir = join(base, sessionId)
    const mFile = join(dir, HISTORY_FILE)
    const jFile = join(dir, HISTORY_JOURNAL)
    const [stampM, stampJ] = [stampNow(mFile), stampNow(jFile)]
    const cached = states.get(keyOf(sessionId))
    if (cached !== undefined && cached.stampM === stampM && cached.stampJ === stampJ) return cached
    const allowed = deps.allowed(base, sessionId)
    // The journal first: a fold between the two reads then shows as records messages.json holds.
    const j = yield* attempt(jFile, "read", () => readInside(jFile, allowed))
    const m = yield* attempt(mFile, "read", () => readInside(mFile, allowed))
    for (const [read, name] of [
      [j, HISTORY_JOURNAL],
      [m, HISTORY_FILE]
    ] as const)
      if (read._tag === "Outside")
        return yield* new PathRefused({
          path: name,
          reason: "leads out of what the session may read through a symlink"
        })
    const state = yield* fromEither(stateOf(sessionId, m, j))
    remember(sessionId, state)
    return state
  })

  const sessionExists = (sessionId: string) =>
    Effect.map(deps.ready, (base) => isDirectoryNow(join(base, sessionId))).pipe(
      Effect.filterOrFail(Boolean, () => new SessionNotFound({ sessionId }))
    )

  /** Writes one record (cutting a torn tail first); the journal file it went to, and its stamp. */
  const appendLine = async (
    sessionId: string,
    dir: string,
    allowed: (real: string) => boolean,
    state: HistoryState,
    seqBefore: number,
    line: string,
    seq: number
  ) => {
    let file = files.get(sessionId)
    if (file !== undefined && file.ino !== state.journalIno) {
      // Not the journal there now (a fold, another process, a recreated session): done with it.
      files.delete(sessionId)
      file.close()
      file = undefined
    }
    if (file?.handle === undefined) {
      const handle = await openForAppend(dir, HISTORY_JOURNAL, allowed)
      const info = await handle.stat().catch(async (e) => {
        await handle.close()
        throw e
      })
      if (file === undefined || file.ino !== info.ino) {
        file = new JournalFile(info.ino, seqBefore)
        files.set(sessionId, file)
      }
      file.use(handle)
    }
    const journal = file
    journal.acquire()
    // The most recently used last; beyond MAX_OPEN, the oldest idle ones are closed and forgotten
    // (idle: no record of theirs waits for its fdatasync).
    files.delete(sessionId)
    files.set(sessionId, journal)
    for (const [id, f] of files) {
      if (files.size <= MAX_OPEN) break
      if (f !== journal && f.idle) {
        f.close()
        files.delete(id)
      }
    }
    try {
      // A line of a few hundred bytes to the page cache: written at once (the fdatasync is not).
      const fd = journal.handle!.fd
      // A torn tail, or only records messages.json already holds: cut off before the record.
      if (state.journalIno !== undefined && state.journalBytes > 0) {
        if (state.records === 0) ftruncateSync(fd, 0)
        else if (state.journalBytes > state.validBytes) ftruncateSync(fd, state.validBytes)
      }
      const bytes = Buffer.from(line, "utf8")
      for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at, bytes.length - at)
      journal.written = seq
      const info = fstatSync(fd)
      return { journal, stamp: stampOf(info), ino: info.ino, size: info.size }
    } catch (e) {
      journal.release()
      throw e
    }
  }

  /** Folds the session's journal (`onlyIfDue`: only when it is past its marks still). */
  const foldNow = Effect.fnUntraced(function* (sessionId: string, onlyIfDue = false) {
    const state = yield* readState(sessionId, true)
    // No journal (another process folded it): nothing to fold, nor to keep of it.
    if (state.journalIno === undefined) return forgetJournal(sessionId)
    if (onlyIfDue && !isDue(state)) return
    const base = yield* deps.ready
    const dir = join(base, sessionId)
    const text = state.text()
    // messages.json first, with the last record it holds: a crash before the journal is gone
    // leaves records that are skipped when read.
    const seq =
      state.records > 0
        ? (yield* fromEither(state.current())).seq
        : Either.match(state.current(), { onLeft: () => 0, onRight: (c) => c.seq })
    if (state.records > 0 && text !== undefined) yield* deps.writeSessionFile(sessionId, HISTORY_FILE, text)
    yield* attempt(join(dir, HISTORY_JOURNAL), "remove", () =>
      unlinkInside(dir, HISTORY_JOURNAL, deps.allowed(base, sessionId))
    )
    // Its records are in messages.json now (or were already): whoever waits on them is done.
    forgetJournal(sessionId, seq)
    const stampM = stampNow(join(dir, HISTORY_FILE))
    remember(sessionId, historyState(stampM, noJournal, 0, text?.length ?? 0, state.current, always(text)))
  })

  /**
   * Drops what the store keeps of a session's journal: folded (its records up to `settled` are in
   * messages.json, so whoever waits on them is done), gone (another process folded it or deleted the
   * session), not foldable, or the session deleted. Its file closes once no record waits on it.
   */
  const forgetJournal = (sessionId: string, settled?: number) => {
    journaled.delete(sessionId)
    lastSpan.delete(sessionId)
    const file = files.get(sessionId)
    if (file === undefined) return
    if (settled !== undefined) file.settle(settled)
    files.delete(sessionId)
    file.close()
  }

  /** A fold that failed is said in the log; a session gone meanwhile is left alone, and forgotten. */
  const quietly = (sessionId: string) => (fold: Effect.Effect<void, StoreError>) =>
    fold.pipe(
      Effect.catchTag("SessionNotFound", () => Effect.sync(() => forgetJournal(sessionId))),
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.void
          : Effect.logWarning(`The history journal of ${sessionId} was not folded`, cause)
      )
    )

  /** The fold of one session, under its lock, one fold at a time. */
  const foldLocked = (sessionId: string, onlyIfDue = false) =>
    quietly(sessionId)(
      deps.withSessionLock(sessionId, foldLock.withPermits(1)(foldNow(sessionId, onlyIfDue)))
    )

  /**
   * The store's own work in the background (a quiet session's fold, the bound's worker), not the
   * request's whose append started it, which has answered by then: without its log annotations (its
   * id, its tenant) and log spans, its folds in traces of their own (`Store.fold`, a root span).
   */
  const detached = <A, E, R>(self: Effect.Effect<A, E, R>) =>
    self.pipe(
      Effect.locally(FiberRef.currentLogAnnotations, HashMap.empty()),
      Effect.locally(FiberRef.currentLogSpan, List.empty())
    )
  const foldSpan = (sessionId: string) =>
    withSpan("Store.fold", { root: true, attributes: { "ctxo.session": sessionId } })

  /** `fold` in a fiber of its own, one at a time for a session in `running` (done when it ends). */
  const inBackground = (
    running: Map<string, Deferred.Deferred<void>>,
    sessionId: string,
    fold: Effect.Effect<void>
  ) =>
    Effect.suspend(() => {
      if (running.has(sessionId)) return Effect.void
      const done = Deferred.unsafeMake<void>(FiberId.none)
      running.set(sessionId, done)
      return fold.pipe(
        Effect.ensuring(
          Effect.zipRight(
            Effect.sync(() => running.delete(sessionId)),
            Deferred.succeed(done, undefined)
          )
        ),
        Effect.forkDaemon,
        Effect.asVoid
      )
    })

  /**
   * A fold in the background (it waits for the lock; the turn that asked goes on), when the journal
   * is still past its marks then. `whenQuiet`: once the session has been quiet for `foldDelay` ms (a
   * fold queued behind a turn held up the client's next turn).
   */
  const scheduleFold = (sessionId: string, whenQuiet: boolean) => {
    const fold = foldSpan(sessionId)(deps.withoutLocks(foldLocked(sessionId, true)))
    // Quiet: no span holds or waits for the lock now, and none appended a record meanwhile.
    const quiet: Effect.Effect<void> = Effect.suspend(() => {
      const before = lastSpan.get(sessionId)
      return Effect.flatMap(Effect.sleep(Math.max(foldDelay, 10)), () =>
        deps.busy(sessionId) || lastSpan.get(sessionId) !== before ? quiet : Effect.void
      )
    })
    // Interruptible, though forked from the append (which is not).
    return inBackground(
      folding,
      sessionId,
      detached(Effect.interruptible(whenQuiet ? Effect.zipRight(quiet, fold) : fold))
    )
  }

  /**
   * While more than `maxJournaled` sessions have a journal, folds the least recently appended one
   * that has been quiet for `foldDelay` (no record since, no span holding or waiting for its lock),
   * one at a time, in one worker. A fiber per session past the bound, each waiting for the store's
   * fold lock, made every release wake them all: memory and time grew with their square. A fold
   * that fails (said in the log) leaves the session's journal to be read as it is, and forgets it
   * (the store's flush does not try it again).
   */
  const foldBeyondBound: Effect.Effect<void> = Effect.suspend(() => {
    let over = journaled.size - maxJournaled
    if (over <= 0) {
      // Said in the step that decides: an append after it starts another worker.
      boundWorker = false
      return Effect.void
    }
    const delay = Math.max(foldDelay, 10)
    const now = performance.now()
    let wait = delay
    for (const [sessionId, at] of journaled) {
      if (over-- <= 0) break
      if (deps.busy(sessionId)) continue
      if (now - at >= delay)
        return foldSpan(sessionId)(foldLocked(sessionId)).pipe(
          Effect.zipRight(
            Effect.sync(() => {
              // Not folded (said in the log): its journal is read as it is; flush does not try again.
              if (journaled.get(sessionId) === at) forgetJournal(sessionId)
            })
          ),
          Effect.zipRight(foldBeyondBound)
        )
      wait = Math.min(wait, at + delay - now)
    }
    return Effect.zipRight(Effect.sleep(Math.max(wait, 10)), foldBeyondBound)
  })

  /**
   * A fold under the lock the caller's span holds, in the background while the span goes on: the
   * session's history is read again, and written, only once it is done (`settle`).
   */
  const foldInSpan = (sessionId: string) =>
    inBackground(inSpan, sessionId, quietly(sessionId)(foldLock.withPermits(1)(foldNow(sessionId))))

  /** Waits for a fold of the session running in a lock span (each new span of the session does). */
  const settle = (sessionId: string): Effect.Effect<void> =>
    Effect.suspend(() => {
      const running = inSpan.get(sessionId)
      return running === undefined ? Effect.void : Deferred.await(running)
    })

  /**
   * Appends `patch` as the next record; the JSON after it, and the wait until it is on disk. `span`:
   * the caller's lock span, when it held the session's lock before this change.
   */
  const append = Effect.fnUntraced(function* (
    sessionId: string,
    state: HistoryState,
    current: { readonly json: unknown; readonly seq: number },
    patch: HistoryPatch,
    span: object | undefined
  ) {
    const base = yield* deps.ready
    const dir = join(base, sessionId)
    const file = join(dir, HISTORY_JOURNAL)
    const seq = current.seq + 1
    const { line, payload } = recordLine(seq, patch)
    // What a reader gets from the record: the patch as written, applied. The patch's own objects
    // when its JSON reads back as them (history's document then shares them), a parse of it else.
    const applied = applyPatch(current.json, jsonExact(patch) ? patch : (JSON.parse(payload) as HistoryPatch))
    if (Either.isLeft(applied))
      return yield* Effect.dieMessage(`history patch of ${sessionId} does not fit: ${applied.left}`)
    const json = applied.right
    const written = yield* Effect.tryPromise({
      try: () => appendLine(sessionId, dir, deps.allowed(base, sessionId), state, current.seq, line, seq),
      catch: (e): StoreError =>
        errnoOf(e) === "ENOENT"
          ? new SessionNotFound({ sessionId })
          : errnoOf(e) === "ELOOP" || e instanceof OutsideError
            ? new PathRefused({
                path: HISTORY_JOURNAL,
                reason: "leads out of its directory through a symlink"
              })
            : deps.io(file, "append to")(e)
    }).pipe(Effect.tapError(() => Effect.sync(() => states.delete(keyOf(sessionId)))))
    const next = historyState(
      state.stampM,
      {
        stampJ: written.stamp,
        journalIno: written.ino,
        validBytes: written.size,
        journalBytes: written.size
      },
      state.records + 1,
      state.bytes - state.journalBytes + written.size,
      currentOf(json, seq),
      textOf(json, seq)
    )
    remember(sessionId, next)
    journaled.delete(sessionId)
    journaled.set(sessionId, performance.now())
    if (journaled.size > maxJournaled && !boundWorker) {
      boundWorker = true
      yield* Effect.forkDaemon(
        deps.withoutLocks(
          detached(Effect.interruptible(foldBeyondBound)).pipe(
            Effect.onExit((exit) =>
              Exit.isSuccess(exit) ? Effect.void : Effect.sync(() => (boundWorker = false))
            )
          )
        )
      )
    }
    const spanNumber = span === undefined ? undefined : numberOf(span)
    const first = spanNumber !== undefined && lastSpan.get(sessionId) !== spanNumber
    if (spanNumber !== undefined) lastSpan.set(sessionId, spanNumber)
    if (isDue(next))
      yield* span === undefined
        ? scheduleFold(sessionId, false)
        : first
          ? foldInSpan(sessionId)
          : scheduleFold(sessionId, true)
    const journal = written.journal
    // The record's reference on its journal file is given back when its sync ends, whoever waits.
    const settled = (synced: Promise<void>) =>
      synced.then(
        () => journal.release(),
        (error: unknown) => {
          // What is on disk is not known: read again, and start over with a new handle.
          states.delete(keyOf(sessionId))
          if (files.get(sessionId) === journal) files.delete(sessionId)
          journal.release()
          throw error
        }
      )
    /** Starts the record's fdatasync (or joins the one running), once; the wait until it is on disk. */
    const sync = (): Effect.Effect<void, StoreError> => {
      const synced = settled(journal.until(seq))
      synced.catch(() => {})
      return Effect.tryPromise({ try: () => synced, catch: deps.io(file, "sync") })
    }
    return { json: json as unknown, sync }
  })

  /** `update`: the step under the session's lock, then its fdatasync (deferred inside `deferSync`). */
  function* updateBody<A, E>(
    sessionId: string,
    f: (json: unknown) => Effect.Effect<readonly [A, HistoryPatch | undefined], E>
  ) {
    const span = yield* deps.lockSpan(sessionId)
    const step = yield* deps.withSessionLock(
      sessionId,
      Effect.gen(() => updateLocked(sessionId, f, span))
    )
    // Outside the lock (unless the caller holds it): appends meanwhile share the next fdatasync.
    // Inside `deferSync` the caller awaits it later.
    const synced = step.sync()
    const deferred = yield* FiberRef.get(deferredSyncs)
    if (deferred === undefined) yield* synced
    else deferred.syncs.push(synced)
    return [step.value, step.json] as const
  }

  /** `update`'s step under the session's lock. */
  function* updateLocked<A, E>(
    sessionId: string,
    f: (json: unknown) => Effect.Effect<readonly [A, HistoryPatch | undefined], E>,
    span: object | undefined
  ) {
    yield* checkSessionId(sessionId)
    const state = yield* readState(sessionId)
    const current = yield* fromEither(state.current())
    const [value, patch] = yield* f(current.json)
    if (patch === undefined) {
      yield* sessionExists(sessionId)
      return { value, json: current.json, sync: (): Effect.Effect<void, StoreError> => Effect.void }
    }
    return {
      value,
      ...(yield* Effect.uninterruptible(append(sessionId, state, current, patch, span)))
    }
  }

  return {
    settle,
    /** messages.json's text with the journal folded in (undefined: no history). */
    readText: (sessionId: string) => Effect.map(readState(sessionId), (state) => state.text()),
    /** The document as JSON, without `journalSeq` (undefined: no history). */
    readJson: (sessionId: string) =>
      Effect.flatMap(readState(sessionId), (state) =>
        Effect.map(fromEither(state.current()), (current) => current.json)
      ),
    update: <A, E>(
      sessionId: string,
      f: (json: unknown) => Effect.Effect<readonly [A, HistoryPatch | undefined], E>
    ): Effect.Effect<readonly [A, unknown], E | StoreError> => Effect.gen(() => updateBody(sessionId, f)),
    /**
     * Replaces the history with `text` (atomically), under the session's lock: the journal is folded
     * first, so a crash at any point leaves the old history or the new one.
     */
    writeWhole: (sessionId: string, text: string) =>
      deps.withSessionLock(
        sessionId,
        Effect.gen(function* () {
          yield* checkSessionId(sessionId)
          const base = yield* deps.ready
          const dir = join(base, sessionId)
          const state = yield* Effect.either(readState(sessionId))
          let seq = 0
          if (Either.isRight(state)) {
            yield* foldNow(sessionId)
            seq = Either.match(state.right.current(), { onLeft: () => 0, onRight: (c) => c.seq })
          } else if (state.left._tag === "HistoryJournalCorrupt" || state.left._tag === "CorruptFile")
            // A history that cannot be read is what this write replaces: its journal goes first.
            yield* attempt(join(dir, HISTORY_JOURNAL), "remove", () =>
              unlinkInside(dir, HISTORY_JOURNAL, deps.allowed(base, sessionId))
            )
          else return yield* state.left
          yield* deps.writeSessionFile(sessionId, HISTORY_FILE, textWithSeq(text, seq))
          states.delete(keyOf(sessionId))
        })
      ),
    /**
     * A session about to be deleted: nothing of it is kept, once a fold of it running in the span
     * that deletes it is done (a fold ending later would put its history back in memory).
     */
    forget: (sessionId: string): Effect.Effect<void> =>
      Effect.zipRight(
        settle(sessionId),
        Effect.sync(() => {
          states.delete(keyOf(sessionId))
          forgetJournal(sessionId)
        })
      ),
    /**
     * Folds the journals this store appended to, after the folds under way. A journal it only read
     * is left alone: a process that reads (the CLI beside a running gateway) writes nothing.
     */
    flush: Effect.gen(function* () {
      yield* Effect.forEach([...inSpan.values(), ...folding.values()], (done) => Deferred.await(done), {
        discard: true
      })
      yield* Effect.forEach([...journaled.keys()], (sessionId) => foldLocked(sessionId), { discard: true })
      for (const file of files.values()) file.close()
    })
  }
}

export type JournalFiles = ReturnType<typeof makeJournalFiles>
