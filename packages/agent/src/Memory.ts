/**
 * Memory levels (seed 003 "记忆层级"): views and summaries over what the store keeps; nothing is
 * ever removed from the files.
 *
 * | level | scope | what | lifetime (default) | where |
 * |---|---|---|---|---|
 * | L1 | session, private | its newest finished turns (`l1Turns`) | 30 minutes | a view of `messages.json`; pins and deletions in the session's `memory.json` |
 * | L2 | session | turns whose importance (`@ctxo/history/Importance`) is over `threshold` (0.6), or pinned | 24 hours | the session's `memory.json` |
 * | L3 | agent, across sessions | the L2 entries of aggregated sessions, deduplicated by text | 7 days | the root's `memory.json` |
 * | L4 | global | L3 entries persisted when a session ends or on the timer | never expires | the root's `memory.json` |
 *
 * Promotion: `sync` promotes every finished turn of a session (archived ones too) whose importance
 * is over the threshold to L2, once; `aggregate` builds L3 from sessions' L2; `persist` copies L3
 * to L4. `persistOnEvents` is the event bus's subscriber: a session that ends is aggregated and
 * persisted, and so is everything on each `MemoryPersistRequested` (the timer publishes one).
 *
 * An entry older than its level's lifetime (since it was last updated) is expired: it is listed
 * only when asked for and is no source, unless pinned. Deleting hides an entry (`deletedAt`);
 * pinning keeps it whatever its age (and an L1 pin promotes the turn to L2).
 */
import { createHash } from "node:crypto"
import type { MemoryItem } from "@ctxo/compiler/ContextSource"
import { decodeHistoryText } from "@ctxo/history/HistoryFormat"
import { HistoryStore } from "@ctxo/history/HistoryStore"
import { importanceOf, PROMOTION_THRESHOLD } from "@ctxo/history/Importance"
import type { HistoryDocument, Message } from "@ctxo/history/Message"
import { type Turn, turnsOf, turnWords } from "@ctxo/history/Turns"
import { HISTORY_FILE } from "@ctxo/store/Paths"
import type { MemoryEntry, MemoryLevel } from "@ctxo/store/Records"
import * as SessionCache from "@ctxo/store/SessionCache"
import { Store } from "@ctxo/store/Store"
import type { StoreError } from "@ctxo/store/StoreErrors"
import { Clock, Context, Effect, Exit, Layer, Option, Queue, Schedule, Schema, type Scope } from "effect"
import { SessionEvents } from "./SessionEvents.ts"

export interface MemorySettings {
  /** Lifetimes in milliseconds (L4 never expires). */
  readonly ttl: { readonly L1: number; readonly L2: number; readonly L3: number }
  /** Importance over which a turn is promoted to L2. */
  readonly threshold: number
  /** How many newest finished turns L1 shows. */
  readonly l1Turns: number
  /** The longest text an entry keeps (a longer one is cut with "…"). */
  readonly maxText: number
}

export const defaultSettings: MemorySettings = {
  ttl: { L1: 30 * 60_000, L2: 24 * 3_600_000, L3: 7 * 24 * 3_600_000 },
  threshold: PROMOTION_THRESHOLD,
  l1Turns: 20,
  maxText: 1_200
}

export class MemoryEntryNotFound extends Schema.TaggedError<MemoryEntryNotFound>(
  "@ctxo/agent/MemoryEntryNotFound"
)("MemoryEntryNotFound", { level: Schema.String, id: Schema.String, where: Schema.String }) {
  override get message() {
    return `${this.where} has no ${this.level} memory entry ${this.id}`
  }
}

export class HistoryUnreadable extends Schema.TaggedError<HistoryUnreadable>("@ctxo/agent/HistoryUnreadable")(
  "HistoryUnreadable",
  { sessionId: Schema.String, reason: Schema.String }
) {
  override get message() {
    return `the history of session ${this.sessionId} cannot be read for memory: ${this.reason}`
  }
}

export type MemoryError = StoreError | MemoryEntryNotFound | HistoryUnreadable

/** An entry as a view shows it: whether it has expired. */
export type MemoryView = MemoryEntry & { readonly expired: boolean }

export interface ListOptions {
  readonly includeExpired?: boolean
  readonly includeDeleted?: boolean
}

export interface Service {
  readonly settings: MemorySettings
  /** L1 or L2 of a session (L2 after promoting what is due). */
  readonly session: (
    sessionId: string,
    level: "L1" | "L2",
    options?: ListOptions
  ) => Effect.Effect<ReadonlyArray<MemoryView>, MemoryError>
  /** L3 or L4 of the data root. */
  readonly global: (
    level: "L3" | "L4",
    options?: ListOptions
  ) => Effect.Effect<ReadonlyArray<MemoryView>, MemoryError>
  /**
   * Promotes the session's important turns to L2 (once each); its L2 entries. `history`: the
   * session's history as the caller read it under the session's lock (read here otherwise).
   * `beforeWrite`: run before memory.json is written, when a turn is due (a turn engine passes the
   * wait for its answer's record to be on disk, and promotes while the disk syncs it: no entry is
   * written of a turn the history might not keep); nothing is written when it fails (its failure
   * is the caller's to report).
   */
  readonly sync: (
    sessionId: string,
    history?: HistoryDocument,
    options?: { readonly beforeWrite?: Effect.Effect<void, StoreError> | undefined }
  ) => Effect.Effect<ReadonlyArray<MemoryEntry>, MemoryError>
  /** Pins (or unpins) an entry; `sessionId` for L1 and L2. */
  readonly pin: (
    level: MemoryLevel,
    id: string,
    pinned: boolean,
    sessionId?: string
  ) => Effect.Effect<MemoryView, MemoryError>
  /** Hides an entry from views and sources (it stays on file). */
  readonly remove: (level: MemoryLevel, id: string, sessionId?: string) => Effect.Effect<void, MemoryError>
  /** L2 of these sessions into L3 (deduplicated by text); the L3 entries they make. */
  readonly aggregate: (
    sessionIds: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<MemoryEntry>, MemoryError>
  /** L3 entries (of a session, or all) copied to L4; the L4 entries written. */
  readonly persist: (sessionId?: string) => Effect.Effect<ReadonlyArray<MemoryEntry>, MemoryError>
  /** What a compile of the session may draw on: its L2, and L3 and L4, live and not deleted. */
  readonly sources: (sessionId: string) => Effect.Effect<ReadonlyArray<MemoryItem>, MemoryError>
}

export class Memory extends Context.Tag("@ctxo/agent/Memory")<Memory, Service>() {}

const hash16 = (text: string) => createHash("sha256").update(text).digest("hex").slice(0, 16)
const normalized = (text: string) => text.toLowerCase().replace(/\s+/g, " ").trim()

/** A turn as memory text: its words (`turnWords`), cut to `maxText`. */
export const turnMemoryText = (turn: Turn, maxText: number = defaultSettings.maxText): string => {
  const text = turnWords(turn)
  return text.length <= maxText ? text : `${text.slice(0, maxText - 1)}…`
}

const turnTime = (turn: Turn): string | undefined =>
  [...turn.messages].reverse().find((m) => m.meta.createdAt !== undefined)?.meta.createdAt

const isExpired = (entry: MemoryEntry, settings: MemorySettings, now: number) => {
  if (entry.pinned === true || entry.level === "L4") return false
  const ttl = settings.ttl[entry.level]
  const at = Date.parse(entry.updatedAt)
  return Number.isFinite(at) && now - at > ttl
}

const view =
  (settings: MemorySettings, now: number) =>
  (entry: MemoryEntry): MemoryView => ({ ...entry, expired: isExpired(entry, settings, now) })

const visible = (options: ListOptions) => (e: MemoryView) =>
  (options.includeDeleted === true || e.deletedAt === undefined) &&
  (options.includeExpired === true || !e.expired)

export const l2Id = (sessionId: string, turn: number) => `L2:${sessionId}:t${turn}`
export const l1Id = (sessionId: string, turn: number) => `L1:${sessionId}:t${turn}`

export const make = (settings: MemorySettings = defaultSettings): Effect.Effect<Service, never, Store> =>
  Effect.gen(function* () {
    const store = yield* Store
    const nowIso = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())

    // A session's finished turns, made once per history document (the history store hands back
    // the same document while the session is unchanged; without one in the context, the store's
    // text is decoded once per text), and each finished turn's importance once while its messages
    // are the same objects (a new turn scores only itself).
    const decoded = store.cache.holder<{
      readonly doc: HistoryDocument
      readonly turns: ReadonlyArray<Turn>
    }>("memory turns")
    const scored = new WeakMap<
      Message,
      { readonly turn: Turn; readonly score: ReturnType<typeof importanceOf> }
    >()
    const importance = (turn: Turn) => {
      const last = turn.messages[turn.messages.length - 1]!
      const hit = scored.get(last)
      if (
        hit !== undefined &&
        (hit.turn === turn ||
          (hit.turn.messages.length === turn.messages.length &&
            hit.turn.messages.every((m, i) => m === turn.messages[i])))
      )
        return hit.score
      const score = importanceOf(turn)
      scored.set(last, { turn, score })
      return score
    }
    const texts = store.cache.holder<{ readonly text: string; readonly doc: HistoryDocument }>(
      "memory history"
    )
    // The per-call work below runs generators made once, here (`Effect.fnUntraced`), not one per call:
    // V8 keeps what a generator function made per call closes over until a full collection
    // (`test/HotPath.test.ts`).
    const documentOf = Effect.fnUntraced(function* (sessionId: string, key: string) {
      const history = yield* Effect.serviceOption(HistoryStore)
      if (Option.isSome(history))
        return yield* history.value
          .load(sessionId)
          .pipe(
            Effect.mapError((e) =>
              e._tag === "SessionNotFound" ? e : new HistoryUnreadable({ sessionId, reason: e.message })
            )
          )
      const text = yield* store.readHistory(sessionId)
      if (text === undefined) return undefined
      const hit = texts.get(key)
      if (hit !== undefined && hit.text === text) return hit.doc
      const doc: HistoryDocument = yield* Effect.mapError(
        decodeHistoryText(text, `${sessionId}/${HISTORY_FILE}`),
        (e) => new HistoryUnreadable({ sessionId, reason: e.message })
      )
      texts.set(key, { text, doc })
      return doc
    })
    const turnsOfSession = Effect.fnUntraced(function* (sessionId: string, given?: HistoryDocument) {
      const key = SessionCache.keyOf(yield* store.scope, sessionId)
      const doc = given ?? (yield* documentOf(sessionId, key))
      if (doc === undefined) return [] as ReadonlyArray<Turn>
      const hit = decoded.get(key)
      if (hit !== undefined && hit.doc === doc) return hit.turns
      // Without summaries among them (most histories), the messages are grouped as they are (the
      // grouping the history keeps as it grows), with no filtered copy of every message each turn.
      const messages = doc.messages.some((m) => m.meta.kind === "summary")
        ? doc.messages.filter((m) => m.meta.kind !== "summary")
        : doc.messages
      const turns = turnsOf(messages).filter((t) => t.finished)
      decoded.set(key, { doc, turns })
      return turns
    })

    const l2EntryOf = (sessionId: string, turn: Turn, at: string, pinned: boolean): MemoryEntry => {
      const { score, reasons } = importance(turn)
      return {
        id: l2Id(sessionId, turn.turn),
        level: "L2",
        text: turnMemoryText(turn, settings.maxText),
        importance: score,
        reasons: pinned && !reasons.includes("pinned") ? [...reasons, "pinned in L1"] : reasons,
        sources: [{ session: sessionId, turn: turn.turn }],
        createdAt: turnTime(turn) ?? at,
        updatedAt: at,
        ...(pinned ? { pinned: true } : {})
      }
    }

    // Turns found not due against a session's entries (under the threshold, or promoted already),
    // by that list: the store hands back the same list while memory.json is unchanged, so a sync
    // after one more turn checks that turn alone. A turn is one session's (its own object), and an
    // empty list holds no promotion, so every empty list shares one key.
    const notDue = new WeakMap<object, WeakSet<Turn>>()
    const noEntries = {}
    const sync: Service["sync"] = Effect.fnUntraced(function* (
      sessionId: string,
      given?: HistoryDocument,
      options: { readonly beforeWrite?: Effect.Effect<void, StoreError> | undefined } = {}
    ) {
      const turns = yield* turnsOfSession(sessionId, given)
      const at = yield* nowIso
      /** The turns due for L2 against `current` (the others are remembered as not due). */
      const dueOf = (current: ReadonlyArray<MemoryEntry>) => {
        const key = current.length === 0 ? noEntries : current
        let seen = notDue.get(key)
        if (seen === undefined) {
          seen = new WeakSet()
          notDue.set(key, seen)
        }
        let known: Set<string> | undefined
        const due: Array<Turn> = []
        for (const t of turns) {
          if (seen.has(t)) continue
          if (importance(t).score > settings.threshold) {
            known ??= new Set(current.map((e) => e.id))
            if (!known.has(l2Id(sessionId, t.turn))) {
              due.push(t)
              continue
            }
          }
          seen.add(t)
        }
        return due
      }
      const promoted = (current: ReadonlyArray<MemoryEntry>) => {
        const due = dueOf(current)
        return due.length === 0
          ? current
          : [...current, ...due.map((t) => l2EntryOf(sessionId, t, at, false))]
      }
      const { beforeWrite } = options
      if (beforeWrite !== undefined) {
        // Read and checked first; when a turn is due, written once `beforeWrite` is done.
        const current = yield* store.readMemory(sessionId)
        if (dueOf(current).length === 0 || Exit.isFailure(yield* Effect.exit(beforeWrite)))
          return current.filter((e) => e.level === "L2")
      }
      const entries = yield* store.updateMemory(sessionId, promoted)
      return entries.filter((e) => e.level === "L2")
    })

    const session: Service["session"] = Effect.fnUntraced(function* (
      sessionId: string,
      level: "L1" | "L2",
      options: ListOptions = {}
    ) {
      const now = yield* Clock.currentTimeMillis
      if (level === "L2") return (yield* sync(sessionId)).map(view(settings, now)).filter(visible(options))
      const turns = (yield* turnsOfSession(sessionId)).slice(-settings.l1Turns)
      const overrides = new Map(
        (yield* store.readMemory(sessionId)).filter((e) => e.level === "L1").map((e) => [e.id, e])
      )
      const at = new Date(now).toISOString()
      return turns
        .map((t): MemoryView => {
          const id = l1Id(sessionId, t.turn)
          const o = overrides.get(id)
          const { score, reasons } = importance(t)
          const entry: MemoryEntry = {
            id,
            level: "L1",
            text: turnMemoryText(t, settings.maxText),
            importance: score,
            reasons,
            sources: [{ session: sessionId, turn: t.turn }],
            createdAt: turnTime(t) ?? at,
            updatedAt: turnTime(t) ?? at,
            ...(o?.pinned === true ? { pinned: true } : {}),
            ...(o?.deletedAt === undefined ? {} : { deletedAt: o.deletedAt })
          }
          return view(settings, now)(entry)
        })
        .filter(visible(options))
    })

    const global: Service["global"] = (level, options = {}) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        return (yield* store.readGlobalMemory)
          .filter((e) => e.level === level)
          .map(view(settings, now))
          .filter(visible(options))
      })

    const change = (
      level: MemoryLevel,
      id: string,
      sessionId: string | undefined,
      edit: (entry: MemoryEntry, at: string) => MemoryEntry
    ) =>
      Effect.gen(function* () {
        const at = yield* nowIso
        const now = Date.parse(at)
        const where = sessionId === undefined ? "the data root" : `session ${sessionId}`
        const missing = new MemoryEntryNotFound({ level, id, where })
        if (level === "L1") {
          if (sessionId === undefined) return yield* missing
          const found = (yield* session(sessionId, "L1", {
            includeDeleted: true,
            includeExpired: true
          })).find((e) => e.id === id)
          if (found === undefined) return yield* missing
          const { expired: _, ...entry } = found
          const edited = edit(entry, at)
          const turn = entry.sources[0]?.turn
          const turns = edited.pinned === true && turn !== undefined ? yield* turnsOfSession(sessionId) : []
          const promoted = turns.find((t) => t.turn === turn)
          yield* store.updateMemory(sessionId, (current) => {
            const others = current.filter((e) => e.id !== id)
            const next = [...others, edited]
            // A pinned L1 turn is promoted to L2 (pinned), whatever its importance.
            if (promoted !== undefined && !current.some((e) => e.id === l2Id(sessionId, promoted.turn)))
              next.push(l2EntryOf(sessionId, promoted, at, true))
            return next
          })
          return view(settings, now)(edited)
        }
        let result: MemoryEntry | undefined
        const update = (current: ReadonlyArray<MemoryEntry>) => {
          const at0 = current.findIndex((e) => e.id === id && e.level === level)
          if (at0 === -1) return current
          result = edit(current[at0]!, at)
          return current.map((e, i) => (i === at0 ? result! : e))
        }
        if (level === "L2") {
          if (sessionId === undefined) return yield* missing
          yield* store.updateMemory(sessionId, update)
        } else yield* store.updateGlobalMemory(update)
        if (result === undefined) return yield* missing
        return view(settings, now)(result)
      })

    const pin: Service["pin"] = (level, id, pinned, sessionId) =>
      change(level, id, sessionId, (e, at) => {
        const { pinned: _, ...rest } = e
        return { ...rest, updatedAt: at, ...(pinned ? { pinned: true } : {}) }
      })

    const remove: Service["remove"] = (level, id, sessionId) =>
      Effect.asVoid(change(level, id, sessionId, (e, at) => ({ ...e, deletedAt: e.deletedAt ?? at })))

    /** Upserts `made` into the root's entries by id (keeping pins and deletions), newest text. */
    const upsertGlobal = (made: ReadonlyArray<MemoryEntry>) =>
      store.updateGlobalMemory((current) => {
        if (made.length === 0) return current
        const byId = new Map(current.map((e) => [e.id, e]))
        for (const e of made) {
          const old = byId.get(e.id)
          byId.set(
            e.id,
            old === undefined
              ? e
              : {
                  ...e,
                  createdAt: old.createdAt,
                  sources: mergeSources(old.sources, e.sources),
                  importance: Math.max(old.importance, e.importance),
                  ...(old.pinned === true ? { pinned: true } : {}),
                  ...(old.deletedAt === undefined ? {} : { deletedAt: old.deletedAt })
                }
          )
        }
        return [...byId.values()]
      })

    const aggregate: Service["aggregate"] = (sessionIds) =>
      Effect.gen(function* () {
        const at = yield* nowIso
        const byText = new Map<string, MemoryEntry>()
        for (const sid of sessionIds) {
          for (const e of yield* sync(sid)) {
            if (e.deletedAt !== undefined) continue
            const key = normalized(e.text)
            const old = byText.get(key)
            byText.set(key, {
              id: `L3:${hash16(key)}`,
              level: "L3",
              text: e.text,
              importance: Math.max(old?.importance ?? 0, e.importance),
              reasons: ["aggregated from L2 across sessions"],
              sources: mergeSources(old?.sources ?? [], e.sources),
              createdAt: old?.createdAt ?? at,
              updatedAt: at
            })
          }
        }
        const made = [...byText.values()]
        yield* upsertGlobal(made)
        return made
      })

    const persist: Service["persist"] = (sessionId) =>
      Effect.gen(function* () {
        const at = yield* nowIso
        const l3 = (yield* store.readGlobalMemory).filter(
          (e) =>
            e.level === "L3" &&
            e.deletedAt === undefined &&
            (sessionId === undefined || e.sources.some((s) => s.session === sessionId))
        )
        const made = l3.map(
          (e): MemoryEntry => ({
            ...e,
            id: `L4:${e.id.slice(3)}`,
            level: "L4",
            reasons: [...e.reasons, "persisted from L3"],
            updatedAt: at
          })
        )
        yield* upsertGlobal(made)
        return made
      })

    const sources: Service["sources"] = Effect.fnUntraced(function* (sessionId: string) {
      const now = yield* Clock.currentTimeMillis
      const live = (e: MemoryEntry) => e.deletedAt === undefined && !isExpired(e, settings, now)
      const l2 = (yield* store.readMemory(sessionId)).filter((e) => e.level === "L2" && live(e))
      const rest = (yield* store.readGlobalMemory).filter((e) => live(e))
      // L4 holds what L3 held when it was persisted: one item per text, the L3 one while it lives.
      const l3Texts = new Set(rest.filter((e) => e.level === "L3").map((e) => e.id.slice(3)))
      return [...l2, ...rest.filter((e) => e.level === "L3" || !l3Texts.has(e.id.slice(3)))].map(
        (e): MemoryItem => ({
          id: e.id,
          level: e.level as MemoryItem["level"],
          text: e.text,
          importance: e.importance,
          sources: e.sources
        })
      )
    })

    return { settings, session, global, sync, pin, remove, aggregate, persist, sources }
  })

const mergeSources = (
  a: ReadonlyArray<MemoryEntry["sources"][number]>,
  b: ReadonlyArray<MemoryEntry["sources"][number]>
) => {
  const seen = new Set(a.map((s) => `${s.session}\u0000${s.turn ?? ""}`))
  return [...a, ...b.filter((s) => !seen.has(`${s.session}\u0000${s.turn ?? ""}`))]
}

export const layer = (settings: MemorySettings = defaultSettings): Layer.Layer<Memory, never, Store> =>
  Layer.effect(Memory, make(settings))

/**
 * The event bus's memory subscriber: a session that ends has its L2 aggregated into L3 and
 * persisted to L4; a `MemoryPersistRequested` persists all of L3. `inScope` runs an effect
 * against the store of an event's scope (a gateway's tenant); by default the one in context.
 * Runs until its scope closes; a failure is logged and the next event handled.
 */
export const persistOnEvents = (
  inScope: <A, E>(scope: string, effect: Effect.Effect<A, E, Memory>) => Effect.Effect<A, E, Memory> = (
    _,
    e
  ) => e
): Effect.Effect<void, never, Memory | SessionEvents | Scope.Scope> =>
  Effect.gen(function* () {
    const events = yield* SessionEvents
    const queue = yield* events.subscribe
    const handle = Effect.gen(function* () {
      const event = yield* Queue.take(queue)
      const memory = yield* Memory
      const work =
        event._tag === "SessionStateChanged" && event.to === "ended"
          ? Effect.flatMap(memory.aggregate([event.sessionId]), () => memory.persist(event.sessionId))
          : event._tag === "MemoryPersistRequested"
            ? memory.persist()
            : Effect.succeed([])
      yield* inScope(event.scope, work).pipe(
        Effect.catchAll((e) => Effect.logWarning(`memory: ${event._tag} in ${event.scope}: ${e.message}`))
      )
    })
    yield* Effect.forkScoped(Effect.forever(handle))
  })

/** Publishes a `MemoryPersistRequested` for `scope` every `every` milliseconds (the L3 → L4 timer). */
export const persistTimer = (
  scope: Effect.Effect<ReadonlyArray<string>>,
  every: number
): Effect.Effect<void, never, SessionEvents | Scope.Scope> =>
  Effect.gen(function* () {
    const events = yield* SessionEvents
    const tick = Effect.flatMap(scope, (scopes) =>
      Effect.forEach(scopes, (s) => events.publish({ _tag: "MemoryPersistRequested", scope: s }), {
        discard: true
      })
    )
    yield* Effect.forkScoped(
      Effect.repeat(tick, Schedule.spaced(`${every} millis`)).pipe(Effect.delay(`${every} millis`))
    )
  })
