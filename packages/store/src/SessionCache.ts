/**
 * What a process keeps of its sessions between requests, in one budget of bytes. Several parts keep
 * a session in a shape of their own: the store its history's state (the JSON and the journal's
 * place), history the decoded document, memory the session's grouped turns, the turn engine its
 * last compile. Each is a holder here, and a session's entries go together: when the budget is
 * exceeded, the least recently used session leaves every holder at once, and its next request reads
 * and decodes it again.
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

export interface Holder<V> {
  /** The holder's value for the session, which becomes the most recently used. */
  readonly get: (key: string) => V | undefined
  /**
   * Keeps the value (the session becomes the most recently used), then evicts what is over the
   * budget. In a weighed holder, `weight` is the value's when the caller has it already (else
   * `weigh` says).
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
  /** Sessions evicted for the budget since the cache was made. */
  readonly evicted: number
  /** Sessions kept, by holder name (holders of one name, as each tenant's store has, added up). */
  readonly holders: Readonly<Record<string, number>>
}

export interface Service {
  /**
   * A holder of values by session key; `name` says whose values they are. With `maxEntries`, its
   * least recently used value also leaves when it would keep more (the session stays in the others).
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

interface Entry {
  bytes: number
  /** By holder. */
  readonly values: Map<number, unknown>
  /** What the values of weighed holders weigh (by holder): their own size, not the history's. */
  readonly own: Map<number, number>
}

export const make = (options: { readonly maxBytes?: number } = {}): Service => {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES
  if (!(maxBytes > 0)) throw new RangeError(`A session cache needs a budget above 0 bytes, not ${maxBytes}`)
  // Least recently used first.
  const sessions = new Map<string, Entry>()
  /** The weight of a size, in each holder. */
  const weightOf = (bytes: number) => Math.max(bytes * TEXT_FACTOR, MIN_SESSION_BYTES)
  let total = 0
  let entries = 0
  let evicted = 0
  /** Values kept, by holder. */
  const counts: Array<number> = []
  const names: Array<string> = []

  /** What the session weighs in one holder. */
  const weightIn = (entry: Entry, holder: number) => entry.own.get(holder) ?? weightOf(entry.bytes)
  /** What the session weighs in all its holders. */
  const weightAll = (entry: Entry) => {
    let n = weightOf(entry.bytes) * (entry.values.size - entry.own.size)
    for (const w of entry.own.values()) n += w
    return n
  }
  const touch = (key: string, entry: Entry) => {
    sessions.delete(key)
    sessions.set(key, entry)
  }
  /** Drops the least recently used sessions until the rest fit; the most recent one stays. */
  const evict = () => {
    for (const [key, entry] of sessions) {
      if (total <= maxBytes || sessions.size <= 1) return
      sessions.delete(key)
      total -= weightAll(entry)
      entries -= entry.values.size
      for (const holder of entry.values.keys()) counts[holder]!--
      evicted++
    }
  }
  const remove = (key: string, entry: Entry, holder: number) => {
    if (!entry.values.has(holder)) return
    total -= weightIn(entry, holder)
    entry.values.delete(holder)
    entry.own.delete(holder)
    entries--
    counts[holder]!--
    if (entry.values.size === 0) sessions.delete(key)
  }

  return {
    holder: <V>(
      name: string,
      options: { readonly maxEntries?: number; readonly weigh?: (value: V) => number } = {}
    ): Holder<V> => {
      const id = counts.length
      counts.push(0)
      names.push(name)
      const maxEntries = options.maxEntries ?? Number.POSITIVE_INFINITY
      const weigh = options.weigh
      /** Its least recently used value leaves (the oldest session that has one). */
      const dropOldest = () => {
        for (const [key, entry] of sessions)
          if (entry.values.has(id)) {
            remove(key, entry, id)
            return
          }
      }
      return {
        get: (key) => {
          const entry = sessions.get(key)
          const value = entry?.values.get(id)
          if (value === undefined) return undefined
          touch(key, entry!)
          return value as V
        },
        set: (key, value, weight) => {
          let entry = sessions.get(key)
          if (entry === undefined) {
            entry = { bytes: 0, values: new Map(), own: new Map() }
            sessions.set(key, entry)
          } else touch(key, entry)
          if (entry.values.has(id)) total -= weightIn(entry, id)
          else {
            entries++
            counts[id]!++
          }
          entry.values.set(id, value)
          if (weigh !== undefined) entry.own.set(id, weight ?? weigh(value))
          total += weightIn(entry, id)
          if (counts[id]! > maxEntries) dropOldest()
          evict()
        },
        delete: (key) => {
          const entry = sessions.get(key)
          if (entry !== undefined) remove(key, entry, id)
        },
        size: () => counts[id]!
      }
    },
    sized: (key, bytes) => {
      const entry = sessions.get(key)
      // A session no holder keeps is sized again when one reads it.
      if (entry === undefined) return
      total += (weightOf(bytes) - weightOf(entry.bytes)) * (entry.values.size - entry.own.size)
      entry.bytes = bytes
      evict()
    },
    maxBytes,
    stats: () => {
      const byName: Record<string, number> = {}
      names.forEach((name, id) => {
        byName[name] = (byName[name] ?? 0) + counts[id]!
      })
      return { sessions: sessions.size, entries, bytes: total, maxBytes, evicted, holders: byName }
    }
  }
}

/** The process's cache (one per gateway: every tenant's stores and the engine draw on it). */
export const layer = (options: { readonly maxBytes?: number } = {}): Layer.Layer<SessionCache> =>
  Layer.sync(SessionCache, () => make(options))
