import { describe, expect, it } from "@effect/vitest"
import * as SessionCache from "../src/SessionCache.ts"

const KB = 1024
/** Bytes a character of history weighs in a holder. */
const F = SessionCache.TEXT_FACTOR
/** What a session with a short history weighs in one holder. */
const MIN = SessionCache.MIN_SESSION_BYTES

describe("SessionCache", () => {
  it("lets the least recently used session go from every holder when the budget is exceeded", () => {
    const cache = SessionCache.make({ maxBytes: 50 * KB * F })
    const decoded = cache.holder<string>("decoded")
    const compiled = cache.holder<string>("compiled")
    for (const id of ["a", "b"]) {
      decoded.set(id, `doc ${id}`)
      compiled.set(id, `compile ${id}`)
      cache.sized(id, 10 * KB)
    }
    expect(cache.stats()).toMatchObject({ sessions: 2, entries: 4, bytes: 40 * KB * F, evicted: 0 })
    // c weighs as much as a or b in one holder: 5 of them in all, within the budget.
    decoded.set("c", "doc c")
    cache.sized("c", 10 * KB)
    expect(cache.stats()).toMatchObject({ sessions: 3, bytes: 50 * KB * F, evicted: 0 })
    // c in a second holder goes past it: a, the least recently used, leaves both holders.
    compiled.set("c", "compile c")
    expect(decoded.get("a")).toBeUndefined()
    expect(compiled.get("a")).toBeUndefined()
    expect([decoded.get("b"), compiled.get("b"), decoded.get("c"), compiled.get("c")]).toEqual([
      "doc b",
      "compile b",
      "doc c",
      "compile c"
    ])
    expect(cache.stats()).toMatchObject({ sessions: 2, entries: 4, bytes: 40 * KB * F, evicted: 1 })
    expect(cache.stats().holders).toEqual({ decoded: 2, compiled: 2 })
  })

  it("keeps a session read recently over one read earlier", () => {
    const cache = SessionCache.make({ maxBytes: 25 * KB * F })
    const held = cache.holder<number>("held")
    for (const [i, id] of ["a", "b"].entries()) {
      held.set(id, i)
      cache.sized(id, 10 * KB)
    }
    expect(held.get("a")).toBe(0)
    held.set("c", 2)
    cache.sized("c", 10 * KB)
    expect([held.get("a"), held.get("b"), held.get("c")]).toEqual([0, undefined, 2])
  })

  it("weighs a session by its size now: a history that grows pushes older ones out", () => {
    const cache = SessionCache.make({ maxBytes: 40 * KB * F })
    const held = cache.holder<string>("held")
    for (const id of ["a", "b", "c"]) {
      held.set(id, id)
      cache.sized(id, 10 * KB)
    }
    cache.sized("c", 25 * KB)
    expect([held.get("a"), held.get("b"), held.get("c")]).toEqual([undefined, "b", "c"])
    expect(cache.stats().bytes).toBe(35 * KB * F)
    // A short history still weighs the objects around it.
    held.set("d", "d")
    cache.sized("d", 10)
    expect(cache.stats().bytes).toBe(35 * KB * F + SessionCache.MIN_SESSION_BYTES)
  })

  it("keeps the session just used even when it alone is over the budget", () => {
    const cache = SessionCache.make({ maxBytes: 10 * KB * F })
    const held = cache.holder<string>("held")
    held.set("small", "s")
    held.set("huge", "h")
    cache.sized("huge", 100 * KB)
    expect([held.get("small"), held.get("huge")]).toEqual([undefined, "h"])
    expect(cache.stats()).toMatchObject({ sessions: 1, bytes: 100 * KB * F, evicted: 1 })
  })

  it("bounds one holder by entries when asked, the session staying in the others", () => {
    const cache = SessionCache.make()
    const decoded = cache.holder<string>("decoded")
    const compiled = cache.holder<string>("compiled", { maxEntries: 2 })
    for (const id of ["a", "b", "c"]) {
      decoded.set(id, id)
      compiled.set(id, id)
    }
    expect([compiled.get("a"), compiled.get("b"), compiled.get("c")]).toEqual([undefined, "b", "c"])
    expect(decoded.get("a")).toBe("a")
    expect([decoded.size(), compiled.size()]).toEqual([3, 2])
  })

  it("gives a deleted value's bytes back and forgets a session no holder keeps", () => {
    const cache = SessionCache.make()
    const one = cache.holder<string>("one")
    const two = cache.holder<string>("two")
    one.set("a", "x")
    two.set("a", "y")
    cache.sized("a", 8 * KB)
    one.delete("a")
    expect(cache.stats()).toMatchObject({ sessions: 1, entries: 1, bytes: 8 * KB * F })
    two.delete("a")
    expect(cache.stats()).toMatchObject({ sessions: 0, entries: 0, bytes: 0 })
    // Sized while no holder keeps it: nothing to weigh.
    cache.sized("a", 8 * KB)
    expect(cache.stats().sessions).toBe(0)
  })

  it("weighs a weighed holder's value by its own size, again each time it is set", () => {
    const cache = SessionCache.make({ maxBytes: 100 * KB })
    const files = cache.holder<string>("files", { weigh: (text) => text.length })
    const decoded = cache.holder<string>("decoded")
    files.set("a", "x".repeat(30 * KB))
    decoded.set("a", "doc a")
    cache.sized("a", 10 * KB)
    // Its files their own 30 KB, the decoded history three times the history's 10 KB.
    expect(cache.stats().bytes).toBe(30 * KB + 10 * KB * F)
    files.set("a", "x".repeat(10 * KB))
    expect(cache.stats().bytes).toBe(10 * KB + 10 * KB * F)
    // The history's size leaves the files' weight alone.
    cache.sized("a", 5 * KB)
    expect(cache.stats().bytes).toBe(10 * KB + 5 * KB * F)
    // b's files take the budget: a leaves every holder.
    files.set("b", "y".repeat(80 * KB))
    expect([files.get("a"), decoded.get("a")]).toEqual([undefined, undefined])
    expect(cache.stats()).toMatchObject({ sessions: 1, bytes: 80 * KB, evicted: 1 })
    files.delete("b")
    expect(cache.stats()).toMatchObject({ sessions: 0, entries: 0, bytes: 0 })
    // A weight the caller has already is taken as it is (not weighed again).
    let weighed = 0
    const counted = cache.holder<string>("counted", {
      weigh: (text) => {
        weighed++
        return text.length
      }
    })
    counted.set("c", "z".repeat(KB), 3 * KB)
    expect([cache.stats().bytes, weighed]).toEqual([3 * KB, 0])
    counted.set("c", "z".repeat(KB))
    expect([cache.stats().bytes, weighed]).toEqual([KB, 1])
  })

  it("keeps most of its sessions through a rotation of more sessions than it holds", () => {
    // Room for 100 sessions at their floor; 200 take turns in rotation, ten rounds.
    const cache = SessionCache.make({ maxBytes: 100 * MIN })
    const held = cache.holder<number>("held")
    const foundByRound: Array<number> = []
    for (let round = 0; round < 10; round++) {
      let found = 0
      for (let s = 0; s < 200; s++)
        if (held.get(`s${s}`) !== undefined) found++
        else held.set(`s${s}`, round)
      foundByRound.push(found)
    }
    // A least-recently-used cache finds none: each session leaves before its next turn. This one
    // keeps the sessions it admitted first (90 of its 100, the window's 10 passing through).
    expect(foundByRound).toEqual([0, 90, 90, 90, 90, 90, 90, 90, 90, 90])
    const stats = cache.stats()
    expect(stats.sessions).toBeLessThanOrEqual(100)
    expect(stats.bytes).toBeLessThanOrEqual(100 * MIN)
    const hits = foundByRound.reduce((a, b) => a + b)
    expect(stats.lookups).toEqual({ held: { hits, misses: 2000 - hits } })
    // Every new session was let go at the window's end, none admitted past the budget.
    expect(stats.rejected).toBe(stats.evicted)
  })

  it("admits a new session once it is asked for more often than the one it would push out", () => {
    const cache = SessionCache.make({ maxBytes: 20 * MIN })
    const held = cache.holder<string>("held")
    /** What the cache had of the session, which it is given when it had nothing. */
    const visit = (key: string) => {
      const found = held.get(key)
      if (found === undefined) held.set(key, key)
      return found
    }
    for (let k = 0; k < 20; k++) visit(`kept${k}`)
    // Sessions asked for once pass through; the hot one, asked for again after each 70 others,
    // is kept from its second visit (the first is as often as the kept ones, and a tie keeps them).
    const hot: Array<string | undefined> = []
    for (let round = 0; round < 5; round++) {
      for (let c = 0; c < 70; c++) visit(`once${round}-${c}`)
      hot.push(visit("hot"))
    }
    expect(hot).toEqual([undefined, undefined, "hot", "hot", "hot"])
    // One kept session made room for it; the 20th kept one passed through the window after the
    // hot one's first visit (a session leaving the window over the budget faces the same test).
    const kept = Array.from({ length: 20 }, (_, k) => held.get(`kept${k}`)).filter((v) => v !== undefined)
    expect(kept.length).toBeGreaterThanOrEqual(17)
    expect(cache.stats().rejected).toBeGreaterThanOrEqual(340)
  })

  it("lets what was asked for often long ago give way to what is asked for now", () => {
    const cache = SessionCache.make({ maxBytes: 20 * MIN })
    const held = cache.holder<string>("held")
    const rotate = (prefix: string, rounds: number) => {
      let lastRound = 0
      for (let round = 0; round < rounds; round++) {
        lastRound = 0
        for (let s = 0; s < 100; s++) {
          const key = `${prefix}${s}`
          if (held.get(key) !== undefined) lastRound++
          else held.set(key, key)
        }
      }
      return lastRound
    }
    // 100 sessions in rotation for 60 rounds: each asked for 60 times, the cache keeps 18 of them.
    expect(rotate("old", 60)).toBeGreaterThanOrEqual(15)
    // Then another 100: their first visits lose to the old ones' counts, but the counts are halved
    // every 10 visits per session kept (at least 640), so the new ones take over within rounds.
    expect(rotate("new", 12)).toBeGreaterThanOrEqual(15)
    expect(Array.from({ length: 100 }, (_, s) => held.get(`old${s}`)).filter((v) => v !== undefined)).toEqual(
      []
    )
  })

  it("refuses a budget of nothing", () => {
    expect(() => SessionCache.make({ maxBytes: 0 })).toThrow(
      "A session cache needs a budget above 0 bytes, not 0"
    )
  })
})
