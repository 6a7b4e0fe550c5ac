import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { makeRanker, rank } from "../src/Relevance.ts"

const words = ["budget", "token", "compile", "cache", "session", "turn", "index", "预算", "会话", "file"]
const text = fc.array(fc.constantFrom(...words), { minLength: 1, maxLength: 12 }).map((w) => w.join(" "))

describe("makeRanker", () => {
  it("ranks a set grown from a cached one exactly as a fresh index does", () => {
    fc.assert(
      fc.property(
        fc.array(text, { minLength: 2, maxLength: 30 }),
        fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 6 }),
        text,
        (texts, steps, query) => {
          const all = texts.map((t, i) => ({ id: String(i + 1), text: t }))
          const ranker = makeRanker()
          let n = 1
          for (const step of steps) {
            n = Math.min(all.length, n + step)
            const docs = all.slice(0, n).map((d) => ({ ...d }))
            expect(ranker(query, docs)).toEqual(rank(query, docs))
          }
        }
      ),
      { numRuns: 100 }
    )
  })

  it("indexes afresh a set that changed a document it had", () => {
    const ranker = makeRanker()
    const docs = [
      { id: "1", text: "token budget" },
      { id: "2", text: "compile cache" }
    ]
    expect(ranker("budget", docs).map((h) => h.id)).toEqual(["1"])
    const changed = [{ id: "1", text: "compile session" }, docs[1]!, { id: "3", text: "budget turn" }]
    expect(ranker("budget", changed).map((h) => h.id)).toEqual(["3"])
    expect(ranker("budget", changed)).toEqual(rank("budget", changed))
  })
})
