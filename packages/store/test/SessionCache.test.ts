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
    // Room for 200 sessions at their floor; 400 take turns in rotation, ten rounds.
    const cache = SessionCache.make({ maxBytes: 200 * MIN })
    const held = cache.holder<number>("held")
    const foundByRound: Array<number> = []
    for (let round = 0; round < 10; round++) {
      let found = 0
      for (let s = 0; s < 400; s++)
        if (held.get(`s${s}`) !== undefined) found++
        else held.set(`s${s}`, round)
      foundByRound.push(found)
    }
    // A least-recently-used cache finds none: each session leaves before its next turn. This one
    // keeps the sessions it admitted first (180 of its 200, the window's 20 passing through).
    expect(foundByRound).toEqual([0, 180, 180, 180, 180, 180, 180, 180, 180, 180])
    const hits = foundByRound.reduce((a, b) => a + b)
    expect(cache.stats().lookups).toEqual({ held: { hits, misses: 4000 - hits } })
    // Every new session was let go at the window's end, none admitted past the budget.
    expect(cache.stats().rejected).toBe(cache.stats().evicted)
  })

  /** What the holder had of the session, which it is given when it had nothing. */
  const visitOf = (held: SessionCache.Holder<string>) => (key: string) => {
    const found = held.get(key)
    if (found === undefined) held.set(key, key)
    return found
  }

  it("admits a new session once it is asked for more often than the one it would push out", () => {
    const cache = SessionCache.make({ maxBytes: 40 * MIN })
    const visit = visitOf(cache.holder<string>("held"))
    for (let k = 0; k < 40; k++) visit(`kept${k}`)
    // Sessions asked for once pass through; the hot one, asked for again after each 70 others,
    // is kept from its second visit (the first is as often as the kept ones, and a tie keeps them).
    const hot: Array<string | undefined> = []
    for (let round = 0; round < 5; round++) {
      for (let c = 0; c < 70; c++) visit(`once${round}-${c}`)
      hot.push(visit("hot"))
    }
    expect(hot).toEqual([undefined, undefined, "hot", "hot", "hot"])
    // The 24 admitted before the window's 16 are kept, but the one that made room for the hot one.
    expect(
      Array.from({ length: 24 }, (_, k) => visit(`kept${k}`)).filter((v) => v !== undefined)
    ).toHaveLength(23)
  })

  it("counts a session looked up by several holders in one turn once", () => {
    // Four holders: room for 40 sessions, 16 of them in the window.
    const cache = SessionCache.make({ maxBytes: 160 * MIN })
    const held = ["state", "document", "memory", "compile"].map((name) => cache.holder<string>(name))
    const turn = (key: string) => held.map((holder) => visitOf(holder)(key)).every((v) => v !== undefined)
    /** Lookups of nothing kept, as many as make the next lookup of a session another visit. */
    const others = cache.holder<string>("others")
    const later = () => {
      for (let n = 0; n <= SessionCache.VISIT_SPAN; n++) others.get(`other${n}`)
    }
    // 40 sessions kept (24 admitted), and the admitted ones asked for twice by one holder.
    for (let k = 0; k < 40; k++) for (const holder of held) holder.set(`kept${k}`, "kept")
    for (let visit = 0; visit < 2; visit++) {
      later()
      for (let k = 0; k < 24; k++) held[0]!.get(`kept${k}`)
    }
    // One turn each of 100 new sessions, four lookups each: one visit, fewer than the kept ones'
    // two, so none is admitted (counted per lookup, each would be asked for more often, and taken in).
    for (let n = 0; n < 100; n++) turn(`new${n}`)
    expect(Array.from({ length: 24 }, (_, k) => turn(`kept${k}`))).toEqual(Array(24).fill(true))
  })

  it("lets those on trial go before those asked for again since they were admitted", () => {
    const cache = SessionCache.make({ maxBytes: 40 * MIN })
    const held = cache.holder<string>("held")
    const visit = visitOf(held)
    // 24 admitted (on trial) and 16 in the window; the first 12 asked for again (protected).
    for (let k = 0; k < 40; k++) visit(`s${k}`)
    for (let k = 0; k < 12; k++) visit(`s${k}`)
    // Then each new session asked for twice (it wins against those on trial, asked for once): the
    // 12 on trial leave before any protected one, though used before them.
    for (let n = 0; n < 12; n++) {
      for (let k = 0; k < 70; k++) visit(`pass${n}-${k}`)
      visit(`twice${n}`)
    }
    for (let n = 0; n < 12; n++) for (let k = 0; k < 70; k++) visit(`pass-again${n}-${k}`)
    for (let n = 0; n < 12; n++) visit(`twice${n}`)
    const kept = (keys: ReadonlyArray<string>) => keys.filter((key) => held.get(key) !== undefined).length
    const range = (from: number, to: number) => Array.from({ length: to - from }, (_, k) => `s${from + k}`)
    expect([kept(range(0, 12)), kept(range(12, 24))]).toEqual([12, 0])
  })

  it("never lets the session used last go, whatever region it is in and whatever it weighs", () => {
    // x admitted (16 newer sessions fill the window) and asked for again (protected, the only one);
    // then its value grows past what the budget has left: the window's oldest leave, not x.
    const files = SessionCache.make({ maxBytes: 20 * MIN })
    const reads = files.holder<number>("file reads", { weigh: (w) => w })
    reads.set("x", MIN)
    for (let k = 0; k < 16; k++) reads.set(`w${k}`, MIN)
    expect(reads.get("x")).toBe(MIN)
    reads.set("x", 10 * MIN)
    const window = Array.from({ length: 16 }, (_, k) => reads.get(`w${k}`) !== undefined)
    expect(reads.get("x")).toBe(10 * MIN)
    expect(window).toEqual([...Array(6).fill(false), ...Array(10).fill(true)])
    // Two new sessions, each over the window's share, in turns that overlap, in a full cache.
    const cache = SessionCache.make({ maxBytes: 100 * MIN })
    const held = cache.holder<string>("held")
    for (let k = 0; k < 100; k++) visitOf(held)(`old${k}`)
    for (const id of ["a", "b"]) {
      held.set(id, id)
      // 4 MIN of history: 12 MIN in the holder, past the window's share of 10 MIN.
      cache.sized(id, 4 * MIN)
    }
    expect([held.get("a"), held.get("b")]).toEqual(["a", "b"])
  })

  it("drops the value of the session used longest ago from a holder bounded by entries", () => {
    const cache = SessionCache.make({ maxBytes: 100 * MIN })
    const history = cache.holder<number>("history")
    const engine = cache.holder<number>("engine", { maxEntries: 2 })
    // a admitted and asked for again (protected); its compile, then b's and c's (in the window).
    history.set("a", 1)
    for (let k = 0; k < 20; k++) history.set(`f${k}`, k)
    history.get("a")
    engine.set("a", 1)
    engine.set("b", 2)
    engine.set("c", 3)
    expect([engine.get("a"), engine.get("b"), engine.get("c")]).toEqual([undefined, 2, 3])
    expect(history.get("a")).toBe(1)
  })

  it("lets what was asked for often long ago give way to what is asked for now", () => {
    const cache = SessionCache.make({ maxBytes: 40 * MIN })
    const held = cache.holder<string>("held")
    const rotate = (prefix: string, rounds: number) => {
      let lastRound = 0
      for (let round = 0; round < rounds; round++) {
        lastRound = 0
        for (let s = 0; s < 200; s++) if (visitOf(held)(`${prefix}${s}`) !== undefined) lastRound++
      }
      return lastRound
    }
    // 200 sessions in rotation for 60 rounds: each asked for 60 times, the cache keeps 23 of them.
    expect(rotate("old", 60)).toBe(23)
    // Then another 200: their first visits lose to the old ones' counts, but the counts are halved
    // every 10 visits per session kept (at least 640), so the new ones take over round by round.
    expect(rotate("new", 20)).toBeGreaterThanOrEqual(12)
  })

  it("refuses a budget of nothing", () => {
    expect(() => SessionCache.make({ maxBytes: 0 })).toThrow(
      "A session cache needs a budget above 0 bytes, not 0"
    )
  })
})
