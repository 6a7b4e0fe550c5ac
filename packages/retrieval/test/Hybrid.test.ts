import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { cosine, rankByVector, reciprocalRankFusion } from "../src/Hybrid.ts"

describe("cosine", () => {
  it("is 1 for the same direction, 0 for orthogonal, zero or mismatched vectors", () => {
    assert.closeTo(cosine([1, 2, 3], [2, 4, 6]), 1, 1e-12)
    assert.strictEqual(cosine([1, 0], [0, 1]), 0)
    assert.strictEqual(cosine([0, 0], [1, 1]), 0)
    assert.strictEqual(cosine([1, 0], [1, 0, 0]), 0)
  })
})

describe("rankByVector", () => {
  it("ranks by similarity, ties by id, only positive similarity, at most limit", () => {
    const hits = rankByVector(
      [1, 0],
      [
        ["c", [1, 0]],
        ["a", [1, 0]],
        ["b", [1, 1]],
        ["d", [-1, 0]]
      ],
      3
    )
    assert.deepStrictEqual(
      hits.map((h) => h.id),
      ["a", "c", "b"]
    )
  })
})

describe("reciprocalRankFusion", () => {
  it("puts what both rankings agree on first", () => {
    const fused = reciprocalRankFusion({
      rankings: [
        [
          { id: "x", score: 9 },
          { id: "y", score: 5 },
          { id: "z", score: 1 }
        ],
        [
          { id: "y", score: 0.9 },
          { id: "w", score: 0.8 }
        ]
      ],
      limit: 10
    })
    assert.deepStrictEqual(
      fused.map((h) => h.id),
      ["y", "x", "w", "z"]
    )
    assert.closeTo(fused[0]!.score, 1 / 62 + 1 / 61, 1e-12)
  })

  it("is sorted, bounded by the limit, and keeps every id of the inputs (property)", () => {
    const ranking = fc
      .uniqueArray(fc.constantFrom("a", "b", "c", "d", "e", "f"), { maxLength: 6 })
      .map((ids) => ids.map((id, i) => ({ id, score: 10 - i })))
    fc.assert(
      fc.property(fc.array(ranking, { maxLength: 3 }), fc.integer({ min: 0, max: 8 }), (rankings, limit) => {
        const fused = reciprocalRankFusion({ rankings, limit })
        const all = new Set(rankings.flat().map((h) => h.id))
        assert.strictEqual(fused.length, Math.min(limit, all.size))
        for (let i = 1; i < fused.length; i++) {
          const [p, h] = [fused[i - 1]!, fused[i]!]
          assert.isTrue(p.score > h.score || (p.score === h.score && p.id < h.id))
        }
      })
    )
  })
})
