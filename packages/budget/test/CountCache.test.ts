import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { CountCache } from "../src/internal/CountCache.ts"

/** A cache whose computations are counted: a miss computes, a hit does not. */
const counted = (capacity: number, maxKeyChars?: number) => {
  const cache = new CountCache(capacity, maxKeyChars)
  let computed = 0
  const count = (text: string) =>
    cache.getOrCompute(text, (t) => {
      computed++
      return t.length
    })
  return { cache, count, computed: () => computed }
}

describe("CountCache", () => {
  it("keeps a text looked up again over one that was not (second chance)", () => {
    const { count, computed } = counted(3)
    for (const text of ["a", "b", "c"]) count(text)
    count("a") // a is used again
    count("d") // full: the oldest unused entry, b, goes
    const before = computed()
    count("a")
    count("c")
    count("d")
    expect(computed()).toBe(before)
    count("b")
    expect(computed()).toBe(before + 1)
  })

  it("stays within its entries and key characters, and always returns the count", () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ maxLength: 12 }), { maxLength: 200 }),
        fc.integer({ min: 1, max: 20 }),
        (texts, capacity) => {
          const { cache, count } = counted(capacity, 64)
          for (const text of texts) expect(count(text)).toBe(text.length)
          const stats = cache.stats()
          expect(stats.size).toBeLessThanOrEqual(capacity)
          expect(stats.keyChars).toBeLessThanOrEqual(64)
          expect(stats.hits + stats.misses).toBe(texts.length)
        }
      ),
      { numRuns: 300 }
    )
  })
})
