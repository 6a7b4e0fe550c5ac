/**
 * Which sessions the session cache finds again, side by side with the least-recently-used policy
 * it had before (the same weights and budget: `Lru` below), over traces of sessions taking turns.
 * Each turn looks the session up in four holders (the store's state, history's document, memory,
 * the engine's last compile), sets what it did not find, and grows the session's history by a
 * turn's text (up to `KEPT_TURNS` turns: compaction keeps a history within its window). Rows: the
 * share of turns that found all four, and the time a turn's lookups take.
 *
 * - rotation: 500 sessions take turns in order, ten rounds, against a budget that holds about 270
 *   of them at their length by the end (the gateway bench's memory row, sequential);
 * - skewed: 2,000 sessions, turns drawn by Zipf (s 0.9), 20,000 turns;
 * - shifting: the skewed trace, then 20,000 more over another 2,000 sessions;
 * - uniform: 1,000 sessions drawn alike, 20,000 turns (no policy can do better than the budget's
 *   share here);
 * - in flight: 8 long sessions (150 KB of history each, more than the window's share) take turns
 *   at once, 20 rounds, their lookups interleaved, with 1 or 4 turns of 450 short sessions between
 *   two lookups, and each turn's end looks the store's state up again (its answer's append): the
 *   turns that found their session whole, and those whose session left between their first
 *   lookup and their last (read again in the middle of a turn).
 *
 * `CTXO_BENCH_ROUNDS` (default 5) is how many times each trace is timed (the median is printed).
 */
import * as SessionCache from "../src/SessionCache.ts"

const rounds = Number(process.env.CTXO_BENCH_ROUNDS ?? 5)
const MB = 1024 * 1024
/** A turn's text: a question and an answer of a few sentences. */
const TURN_BYTES = 800
/** Turns a history holds at most (compaction keeps it within the model's window). */
const KEPT_TURNS = 50

interface Cache {
  readonly holder: (name: string) => {
    readonly get: (key: string) => unknown
    readonly set: (key: string, value: unknown) => void
  }
  readonly sized: (key: string, bytes: number) => void
}

/**
 * The policy before this cache's (its code at e858e15~1, for these traces: no weighed holder, no
 * bound on entries): one list, the least recently used session out first, the last one kept.
 */
const Lru = (maxBytes: number): Cache => {
  const weightOf = (bytes: number) =>
    Math.max(bytes * SessionCache.TEXT_FACTOR, SessionCache.MIN_SESSION_BYTES)
  const sessions = new Map<string, { bytes: number; values: Map<number, unknown> }>()
  let total = 0
  let holders = 0
  const touch = (key: string) => {
    const entry = sessions.get(key)!
    sessions.delete(key)
    sessions.set(key, entry)
    return entry
  }
  const evict = () => {
    for (const [key, entry] of sessions) {
      if (total <= maxBytes || sessions.size <= 1) return
      sessions.delete(key)
      total -= weightOf(entry.bytes) * entry.values.size
    }
  }
  return {
    holder: () => {
      const id = holders++
      return {
        get: (key) => {
          const value = sessions.get(key)?.values.get(id)
          if (value !== undefined) touch(key)
          return value
        },
        set: (key, value) => {
          if (!sessions.has(key)) sessions.set(key, { bytes: 0, values: new Map() })
          const entry = touch(key)
          if (!entry.values.has(id)) total += weightOf(entry.bytes)
          entry.values.set(id, value)
          evict()
        }
      }
    },
    sized: (key, bytes) => {
      const entry = sessions.get(key)
      if (entry === undefined) return
      total += (weightOf(bytes) - weightOf(entry.bytes)) * entry.values.size
      entry.bytes = bytes
      evict()
    }
  }
}

/**
 * The lookup a turn makes in each of its four holders (the store's state, history's document,
 * memory, the engine's last compile): whether the holder had the session; if not, it is given a
 * value, as a turn that read the session again does.
 */
const lookupsOf = (cache: Cache) => {
  const holders = ["store history state", "history document", "memory", "engine last compile"].map((name) =>
    cache.holder(name)
  )
  return (key: string, holder: number) => {
    if (holders[holder]!.get(key) !== undefined) return true
    holders[holder]!.set(key, 1)
    return false
  }
}

/** Replays a trace: the share of turns that found the session in all four holders. */
const replay = (cache: Cache, trace: ReadonlyArray<number>) => {
  const lookup = lookupsOf(cache)
  const turns = new Map<number, number>()
  let found = 0
  for (const session of trace) {
    const key = SessionCache.keyOf("/data/tenant", `session-${session}`)
    const turn = (turns.get(session) ?? 0) + 1
    turns.set(session, turn)
    let all = true
    for (let holder = 0; holder < 4; holder++) if (!lookup(key, holder)) all = false
    cache.sized(key, Math.min(turn, KEPT_TURNS) * TURN_BYTES)
    if (all) found++
  }
  return found / trace.length
}

let seed = 1
const random = () => {
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed / 2147483648
}
const zipf = (sessions: number, turns: number, s: number) => {
  const cumulative: Array<number> = []
  let sum = 0
  for (let i = 1; i <= sessions; i++) {
    sum += 1 / i ** s
    cumulative.push(sum)
  }
  return Array.from({ length: turns }, () => {
    const r = random() * sum
    let lo = 0
    let hi = sessions - 1
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (cumulative[mid]! < r) lo = mid + 1
      else hi = mid
    }
    return lo
  })
}
const traces: ReadonlyArray<readonly [string, ReadonlyArray<number>]> = [
  ["rotation, 500 sessions x 10 turns", Array.from({ length: 5000 }, (_, i) => i % 500)],
  ["skewed, 2,000 sessions, Zipf 0.9", zipf(2000, 20_000, 0.9)],
  [
    "shifting, 2,000 then 2,000 others",
    [...zipf(2000, 20_000, 0.9), ...zipf(2000, 20_000, 0.9).map((s) => s + 2000)]
  ],
  ["uniform, 1,000 sessions", Array.from({ length: 20_000 }, () => Math.floor(random() * 1000))]
]

/**
 * Turns in flight (see above): [turns found whole, turns timed, sessions lost mid-turn, turns that
 * could lose theirs].
 */
const inFlight = (cache: Cache, background: number) => {
  const lookup = lookupsOf(cache)
  const look = (key: string, holder: number, bytes: number) => {
    if (lookup(key, holder)) return true
    cache.sized(key, bytes)
    return false
  }
  let short = 0
  const shortTurn = () => {
    const key = `short-${short++ % 450}`
    for (let h = 0; h < 4; h++) look(key, h, 2 * TURN_BYTES)
  }
  for (let t = 0; t < 450 * 3; t++) shortTurn()
  const long = Array.from({ length: 8 }, (_, i) => `long-${i}`)
  let whole = 0
  let timed = 0
  let lost = 0
  let ended = 0
  for (let round = 0; round < 20; round++) {
    const found = long.map(() => 0)
    for (let h = 0; h < 4; h++)
      long.forEach((key, i) => {
        if (look(key, h, 150 * 1024)) found[i]!++
        for (let b = 0; b < background; b++) shortTurn()
      })
    for (const key of long) {
      ended++
      if (!look(key, 0, 150 * 1024)) lost++
      for (let b = 0; b < background; b++) shortTurn()
    }
    if (round > 0)
      for (const n of found) {
        timed++
        if (n === 4) whole++
      }
  }
  return [whole, timed, lost, ended] as const
}

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
console.log(
  `session cache bench: ${SessionCache.DEFAULT_MAX_BYTES / MB} MB budget, four holders, ${TURN_BYTES} bytes of text a turn (at most ${KEPT_TURNS} turns kept); turns found whole, W-TinyLFU (this cache) against LRU (before); median of ${rounds} timed replays`
)
for (const [name, trace] of traces) {
  const time = (make: () => Cache) => {
    let share = 0
    const times: Array<number> = []
    for (let r = 0; r < rounds; r++) {
      const cache = make()
      const start = performance.now()
      share = replay(cache, trace)
      times.push(((performance.now() - start) / trace.length) * 1000)
    }
    return { share, perTurn: median(times) }
  }
  const lru = time(() => Lru(SessionCache.DEFAULT_MAX_BYTES))
  const now = time(() => SessionCache.make())
  const pct = (n: number) => `${(n * 100).toFixed(1)}%`
  console.log(
    `${name.padEnd(36)} found ${pct(now.share)} against ${pct(lru.share)} (${lru.share > 0 ? `${(now.share / lru.share).toFixed(2)}x` : "LRU found none"}); lookups ${now.perTurn.toFixed(2)} µs a turn against ${lru.perTurn.toFixed(2)} (${(now.perTurn / lru.perTurn).toFixed(2)}x)`
  )
}
for (const background of [1, 4]) {
  const [lruWhole, timed, lruLost, ended] = inFlight(Lru(SessionCache.DEFAULT_MAX_BYTES), background)
  const [whole, , lost] = inFlight(SessionCache.make(), background)
  console.log(
    `${`in flight, 8 long sessions, ${background} short turn${background > 1 ? "s" : ""} a step`.padEnd(36)} found whole ${whole} of ${timed} turns against ${lruWhole}; sessions left mid-turn ${lost} of ${ended} against ${lruLost}`
  )
}
