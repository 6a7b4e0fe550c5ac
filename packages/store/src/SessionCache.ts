/**
 * What a process keeps of its sessions between requests, in one budget of bytes. Several parts keep
 * a session in a shape of their own: the store its history's state (the JSON and the journal's
 * place), history the decoded document, memory the session's grouped turns, the turn engine its
 * last compile. Each is a holder here, and a session's entries go together: when the budget is
 * exceeded, a session leaves every holder at once, and its next request reads and decodes it again.
 *
 * Which session leaves: the budget is shared the way W-TinyLFU shares it (Caffeine's policy). A
 * session new to the cache enters a window (`WINDOW_SHARE` of the budget, and at least the last
 * `WINDOW_SESSIONS` used, whatever they weigh, so that a turn in flight keeps its session while
 * fewer other sessions are used during it). Leaving the window, least recently used first, it is
 * admitted while the budget holds it; over the budget, only when it was asked for more often lately
 * than the admitted session that would leave for it (ties keep the admitted one). Admitted sessions are on trial until asked for again, then
 * protected (`PROTECTED_SHARE` of the rest); those on trial leave first. The session used last
 * never leaves, whatever it weighs. A least-recently-used cache lets every session go before its
 * next turn when more sessions take turns in rotation than it holds (none found again); this one
 * keeps most of its admitted sessions through such a rotation and lets the new ones pass through
 * the window.
 *
 * How often a session was asked for: its lookups, one per visit (a turn looks it up in several
 * holders: lookups within `VISIT_SPAN` lookups of any session since the one that counted are the
 * same visit), all halved every `AGE_EVERY` visits per session kept, so that what was often asked
 * for long ago gives way. The counts are kept for at most about eight times the sessions kept (the
 * halving forgets a count of one), outside the budget.
 *
 * A session weighs `TEXT_FACTOR` times its history's stored text (its length, which the store says
 * when it reads or writes it: `sized`), at least `MIN_SESSION_BYTES`, in each holder that keeps it;
 * in a weighed holder (the store's file reads, a session's memory) what its value weighs itself.
 * Counting holders by entries instead let a gateway's memory grow with the length of its sessions:
 * 256 long sessions in each of five holders, and as many again per tenant.
 *
 * Keys are `keyOf(scope, sessionId)`, the scope being the store's root (a tenant's), so two tenants'
 * sessions of the same id are apart, and the holders of one store agree on the key.
 */
import { Context, Layer } from "effect"

/** The budget when none is configured (`CTXO_SESSION_CACHE_MB` in the gateway). */
export const DEFAULT_MAX_BYTES = 16 * 1024 * 1024
/**
 * A history's shapes in memory (parsed JSON, decoded messages, grouped turns, a compile's units)
 * against its text: the gateway's live heap grew by about 2.3 bytes per character of history per
 * holder in its memory bench; 3 keeps the budget an upper bound.
 */
export const TEXT_FACTOR = 3
/** What a session weighs at least in a holder (the objects around a short history). */
export const MIN_SESSION_BYTES = 8192
/** The share of the budget for sessions new to the cache, before they are admitted or let go. */
export const WINDOW_SHARE = 0.1
/**
 * Sessions the window holds past its share, whatever they weigh: the last ones used, so that a
 * turn in flight (as many as a tenant's requests in flight) keeps its session while fewer other
 * sessions than this are used during it.
 */
export const WINDOW_SESSIONS = 16
/** The share of the admitted sessions' budget for those asked for again since their admission. */
export const PROTECTED_SHARE = 0.8
/**
 * A session's lookups count as one visit (a turn looks it up in several holders) until this many
 * lookups, of any session, have been made since the one that counted.
 */
export const VISIT_SPAN = 64
/** The visits counted are halved after this many visits per session kept (at least 64 sessions). */
export const AGE_EVERY = 10

export interface Holder<V> {
  /** The holder's value for the session, which becomes the session used last. */
  readonly get: (key: string) => V | undefined
  /**
   * Keeps the value (the session becomes the session used last), then evicts what is over the
   * budget, never the session used last. In a weighed holder, `weight` is the value's when the
   * caller has it already (else `weigh` says).
   */
  readonly set: (key: string, value: V, weight?: number) => void
  readonly delete: (key: string) => void
  /** Sessions this holder keeps a value for. */
  readonly size: () => number
}

export interface Stats {
  readonly sessions: number
  /** Values kept, over all holders. */
  readonly entries: number
  /** What the kept sessions weigh, each in every holder that keeps it. */
  readonly bytes: number
  readonly maxBytes: number
  /** Sessions let go for the budget since the cache was made (those never admitted included). */
  readonly evicted: number
  /** Of them, sessions new to the cache that were not admitted (asked for no more than those kept). */
  readonly rejected: number
  /** Sessions kept, by holder name (holders of one name, as each tenant's store has, added up). */
  readonly holders: Readonly<Record<string, number>>
  /** Lookups (`get`) that found the holder's value, and those that did not, by holder name. */
  readonly lookups: Readonly<Record<string, { readonly hits: number; readonly misses: number }>>
}

export interface Service {
  /**
   * A holder of values by session key; `name` says whose values they are. With `maxEntries`, the
   * value of its session used longest ago also leaves when it would keep more (the session stays in
   * the others).
   * With `weigh`, a value weighs what it says (its own bytes: a session's files, its memory), set
   * again when the value is; without, the session's weight by its history.
   */
  readonly holder: <V>(
    name: string,
    options?: { readonly maxEntries?: number; readonly weigh?: (value: V) => number }
  ) => Holder<V>
  /** The session's history is this long as stored (its text's length). */
  readonly sized: (key: string, bytes: number) => void
  /** The budget, in bytes. */
  readonly maxBytes: number
  readonly stats: () => Stats
}

export class SessionCache extends Context.Tag("@ctxo/store/SessionCache")<SessionCache, Service>() {}

export const keyOf = (scope: string, sessionId: string) => `${scope}\u0000${sessionId}`

/** Where a session is: new to the cache, admitted on trial, or asked for again since. */
type Region = 0 | 1 | 2
const WINDOW: Region = 0
const PROBATION: Region = 1
const PROTECTED: Region = 2

interface Entry {
  bytes: number
  /** When it was last used (the cache's count of uses). */
  used: number
  /** What it weighs in all its holders. */
  weight: number
  region: Region
  /** By holder. */
  readonly values: Map<number, unknown>
  /** What the values of weighed holders weigh (by holder): their own size, not the history's. */
  readonly own: Map<number, number>
}

/** How often a session was asked for lately, and the lookup that last counted. */
interface Visits {
  count: number
  at: number
}

/** The least recently used of a region (its first entry) other than `except`. */
const oldest = (region: Map<string, Entry>, except?: Entry): [string, Entry] | undefined => {
  for (const pair of region) if (pair[1] !== except) return pair
  return undefined
}

export const make = (options: { readonly maxBytes?: number } = {}): Service => {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES
  if (!(maxBytes > 0)) throw new RangeError(`A session cache needs a budget above 0 bytes, not ${maxBytes}`)
  const windowMax = maxBytes * WINDOW_SHARE
  const protectedMax = (maxBytes - windowMax) * PROTECTED_SHARE
  // Each least recently used first: new to the cache, on trial, protected.
  const regions = [new Map<string, Entry>(), new Map<string, Entry>(), new Map<string, Entry>()] as const
  const [window, probation, protect] = regions
  /** What each region's sessions weigh. */
  const regionBytes = [0, 0, 0]
  /** What every session weighs, in every holder that keeps it. */
  const total = () => regionBytes[WINDOW]! + regionBytes[PROBATION]! + regionBytes[PROTECTED]!
  /** The weight of a size, in each holder. */
  const weightOf = (bytes: number) => Math.max(bytes * TEXT_FACTOR, MIN_SESSION_BYTES)
  let entries = 0
  let evicted = 0
  let rejected = 0
  /** By holder: values kept, lookups that found one, lookups that did not. */
  const counts: Array<number> = []
  const hits: Array<number> = []
  const misses: Array<number> = []
  const names: Array<string> = []
  /** Uses so far (`Entry.used`), and the session used last, which stays whatever it weighs. */
  let uses = 0
  let last: Entry | undefined

  const visits = new Map<string, Visits>()
  let lookups = 0
  let counted = 0
  const sessionCount = () => window.size + probation.size + protect.size
  /** A lookup of the session: a visit unless one was counted within the last `VISIT_SPAN` lookups. */
  const visit = (key: string) => {
    lookups++
    const seen = visits.get(key)
    if (seen === undefined) visits.set(key, { count: 1, at: lookups })
    else if (lookups - seen.at > VISIT_SPAN) {
      seen.count++
      seen.at = lookups
    } else return
    if (++counted < AGE_EVERY * Math.max(64, sessionCount())) return
    counted = 0
    for (const [k, v] of visits)
      if (v.count > 1) v.count >>= 1
      else visits.delete(k)
  }
  const frequencyOf = (key: string) => visits.get(key)?.count ?? 0

  const find = (key: string) => window.get(key) ?? probation.get(key) ?? protect.get(key)
  /** What the session weighs in one holder. */
  const weightIn = (entry: Entry, holder: number) => entry.own.get(holder) ?? weightOf(entry.bytes)
  const grow = (entry: Entry, delta: number) => {
    entry.weight += delta
    regionBytes[entry.region]! += delta
  }
  /** The session out of its region (and its weight with it). */
  const unlink = (key: string, entry: Entry) => {
    regions[entry.region].delete(key)
    regionBytes[entry.region]! -= entry.weight
  }
  /** The session becomes the most recently used of `region`. */
  const place = (key: string, entry: Entry, region: Region) => {
    unlink(key, entry)
    entry.region = region
    regions[region].set(key, entry)
    regionBytes[region]! += entry.weight
  }
  /** The session was used: the most recent of its region, and protected if it was on trial. */
  const touch = (key: string, entry: Entry) => {
    entry.used = ++uses
    last = entry
    place(key, entry, entry.region === PROBATION ? PROTECTED : entry.region)
  }
  const drop = (key: string, entry: Entry) => {
    unlink(key, entry)
    entries -= entry.values.size
    for (const holder of entry.values.keys()) counts[holder]!--
    evicted++
  }
  /**
   * Protected sessions past their share go back on trial. The window's oldest leave it past its
   * share and its `WINDOW_SESSIONS`: each admitted on trial while the budget holds it, else only by
   * being asked for more often than the admitted session that would leave for it (on trial first;
   * ties keep the admitted one). Then, while the budget is exceeded, admitted sessions leave, on
   * trial first, then the window's; the session used last stays.
   */
  const evict = () => {
    while (regionBytes[PROTECTED]! > protectedMax && protect.size > 1) {
      const [key, entry] = oldest(protect)!
      place(key, entry, PROBATION)
    }
    while (regionBytes[WINDOW]! > windowMax && window.size > WINDOW_SESSIONS) {
      const [key, entry] = oldest(window, last)!
      for (;;) {
        const admitted = total() > maxBytes ? (oldest(probation, last) ?? oldest(protect, last)) : undefined
        if (admitted === undefined) {
          place(key, entry, PROBATION)
          break
        }
        if (frequencyOf(key) <= frequencyOf(admitted[0])) {
          drop(key, entry)
          rejected++
          break
        }
        drop(admitted[0], admitted[1])
      }
    }
    while (total() > maxBytes) {
      const victim = oldest(probation, last) ?? oldest(protect, last) ?? oldest(window, last)
      if (victim === undefined) return
      drop(victim[0], victim[1])
    }
  }
  const remove = (key: string, entry: Entry, holder: number) => {
    if (!entry.values.has(holder)) return
    grow(entry, -weightIn(entry, holder))
    entry.values.delete(holder)
    entry.own.delete(holder)
    entries--
    counts[holder]!--
    if (entry.values.size === 0) unlink(key, entry)
  }

  return {
    holder: <V>(
      name: string,
      options: { readonly maxEntries?: number; readonly weigh?: (value: V) => number } = {}
    ): Holder<V> => {
      const id = counts.length
      counts.push(0)
      hits.push(0)
      misses.push(0)
      names.push(name)
      const maxEntries = options.maxEntries ?? Number.POSITIVE_INFINITY
      const weigh = options.weigh
      /** The value of its session used longest ago leaves. */
      const dropOldest = () => {
        let found: [string, Entry] | undefined
        for (const region of regions)
          for (const pair of region)
            if (pair[1].values.has(id) && (found === undefined || pair[1].used < found[1].used)) found = pair
        if (found !== undefined) remove(found[0], found[1], id)
      }
      return {
        get: (key) => {
          visit(key)
          const entry = find(key)
          const value = entry?.values.get(id)
          if (value === undefined) {
            misses[id]!++
            return undefined
          }
          hits[id]!++
          touch(key, entry!)
          return value as V
        },
        set: (key, value, weight) => {
          let entry = find(key)
          if (entry === undefined) {
            entry = { bytes: 0, used: ++uses, weight: 0, region: WINDOW, values: new Map(), own: new Map() }
            window.set(key, entry)
            last = entry
          } else touch(key, entry)
          if (entry.values.has(id)) grow(entry, -weightIn(entry, id))
          else {
            entries++
            counts[id]!++
          }
          entry.values.set(id, value)
          if (weigh !== undefined) entry.own.set(id, weight ?? weigh(value))
          grow(entry, weightIn(entry, id))
          if (counts[id]! > maxEntries) dropOldest()
          evict()
        },
        delete: (key) => {
          const entry = find(key)
          if (entry !== undefined) remove(key, entry, id)
        },
        size: () => counts[id]!
      }
    },
    sized: (key, bytes) => {
      const entry = find(key)
      // A session no holder keeps is sized again when one reads it.
      if (entry === undefined) return
      grow(entry, (weightOf(bytes) - weightOf(entry.bytes)) * (entry.values.size - entry.own.size))
      entry.bytes = bytes
      evict()
    },
    maxBytes,
    stats: () => {
      const byName: Record<string, number> = {}
      const byHolder: Record<string, { hits: number; misses: number }> = {}
      names.forEach((name, id) => {
        byName[name] = (byName[name] ?? 0) + counts[id]!
        const mine = byHolder[name] ?? { hits: 0, misses: 0 }
        mine.hits += hits[id]!
        mine.misses += misses[id]!
        byHolder[name] = mine
      })
      return {
        sessions: sessionCount(),
        entries,
        bytes: total(),
        maxBytes,
        evicted,
        rejected,
        holders: byName,
        lookups: byHolder
      }
    }
  }
}

/** The process's cache (one per gateway: every tenant's stores and the engine draw on it). */
export const layer = (options: { readonly maxBytes?: number } = {}): Layer.Layer<SessionCache> =>
  Layer.sync(SessionCache, () => make(options))
