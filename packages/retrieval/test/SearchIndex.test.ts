import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import fc from "fast-check"
import type { IndexFormatError } from "../src/RetrievalErrors.ts"
import type { Document } from "../src/SearchIndex.ts"
import { SearchIndex } from "../src/SearchIndex.ts"

const docs: Array<Document> = [
  {
    id: "deploy#Rollback",
    title: "Deploy / Rollback",
    text: "Roll back a production deploy with the rollback job.",
    meta: { path: "deploy.md" }
  },
  {
    id: "deploy#Canary",
    title: "Deploy / Canary",
    text: "The canary gets 5% of traffic first.",
    meta: { path: "deploy.md" }
  },
  {
    id: "faq#Refunds",
    title: "FAQ / Refunds",
    text: "Annual plans can be refunded within 30 days.",
    meta: { path: "faq.md" }
  },
  {
    id: "发布#回滚",
    title: "发布规范 / 回滚",
    text: "发现问题时优先回滚，在发布平台上点击回滚到上一版本。",
    meta: { path: "发布.md" }
  }
]

const loadError = (input: unknown): IndexFormatError => {
  const result = SearchIndex.fromJSON(input)
  if (Either.isRight(result)) throw new Error("expected an error")
  return result.left
}

describe("SearchIndex", () => {
  it("ranks the block that holds the query's words first, in English and Chinese", () => {
    const index = SearchIndex.fromDocuments(docs)
    expect(index.search("how do I roll back a deploy")[0]?.id).toBe("deploy#Rollback")
    expect(index.search("怎么回滚上一个版本")[0]?.id).toBe("发布#回滚")
    expect(index.search("refunded annual plan")[0]?.id).toBe("faq#Refunds")
  })

  it("returns nothing for a query of stop words only, or a limit of 0", () => {
    const index = SearchIndex.fromDocuments(docs)
    expect(index.search("what is the")).toEqual([])
    expect(index.search("rollback", { limit: 0 })).toEqual([])
  })

  it("breaks ties by id, whatever the insertion order", () => {
    const same = ["c", "a", "b"].map((id) => ({ id, text: "identical words here" }))
    expect(
      SearchIndex.fromDocuments(same)
        .search("identical")
        .map((h) => h.id)
    ).toEqual(["a", "b", "c"])
    expect(
      SearchIndex.fromDocuments([...same].reverse())
        .search("identical")
        .map((h) => h.id)
    ).toEqual(["a", "b", "c"])
  })

  it("applies the filter before the limit", () => {
    const index = SearchIndex.fromDocuments(docs)
    const hits = index.search("rollback deploy canary refunded", {
      limit: 1,
      filter: (d) => d.meta.path === "faq.md"
    })
    expect(hits.map((h) => h.id)).toEqual(["faq#Refunds"])
  })

  it("upsert replaces a document's words; remove forgets it", () => {
    const index = SearchIndex.fromDocuments(docs)
    expect(index.upsert({ id: "faq#Refunds", text: "Credit notes replace refunds." })).toBe("replaced")
    expect(index.search("annual")).toEqual([])
    expect(index.search("credit")[0]?.id).toBe("faq#Refunds")
    expect(index.remove("faq#Refunds")).toBe(true)
    expect(index.remove("faq#Refunds")).toBe(false)
    expect(index.search("credit")).toEqual([])
    expect(index.size).toBe(3)
    expect(index.meta("deploy#Canary")).toEqual({ path: "deploy.md" })
    expect(index.meta("faq#Refunds")).toBeUndefined()
  })

  it("loads its own snapshot, also through JSON text", () => {
    const index = SearchIndex.fromDocuments(docs)
    const text = JSON.stringify(index)
    const loaded = SearchIndex.fromJSON(text).pipe(Either.getOrThrow)
    expect(loaded.search("rollback")).toEqual(index.search("rollback"))
    expect(loaded.size).toBe(4)
  })

  it("refuses malformed text, another format, version or analyzer, and wrong shapes, in one sentence", () => {
    const snapshot = JSON.parse(JSON.stringify(SearchIndex.fromDocuments(docs)))
    const cases: Array<[unknown, RegExp]> = [
      ["{", /not valid JSON/],
      ["", /empty/],
      ["[1]", /expected a JSON object/],
      [{ ...snapshot, format: "other" }, /format is "other", expected "ctxo.retrieval\/search-index"/],
      [{ ...snapshot, version: 2 }, /version 2 is not supported \(this build reads version 1\)/],
      [
        { ...snapshot, analyzer: { ...snapshot.analyzer, version: 99 } },
        /analyzer version 99.*rebuild the index/
      ],
      [
        { ...snapshot, index: { ...snapshot.index, documentCount: "4" } },
        /index\.documentCount: expected number, got "4"/
      ],
      [{ ...snapshot, titleBoost: undefined }, /titleBoost/]
    ]
    for (const [input, reason] of cases) {
      const error = loadError(input)
      expect(error._tag).toBe("IndexFormatError")
      expect(error.reason).toMatch(reason)
      expect(error.message).toMatch(/^The saved search index cannot be loaded: /)
      expect(error.message).not.toMatch(/\n/)
      expect(error.message.length).toBeLessThanOrEqual(300)
    }
  })
})

// Random small corpora and edit sequences over a small vocabulary (so queries hit).
const vocabulary = [
  "deploy",
  "rollback",
  "canary",
  "refund",
  "invoice",
  "回滚",
  "发布",
  "数据库",
  "key",
  "limit"
]
const text = fc.array(fc.constantFrom(...vocabulary), { minLength: 1, maxLength: 8 }).map((w) => w.join(" "))
const op = fc.oneof(
  fc.record({
    kind: fc.constant("upsert" as const),
    id: fc.integer({ min: 0, max: 12 }),
    text,
    title: fc.option(text, { nil: undefined })
  }),
  fc.record({ kind: fc.constant("remove" as const), id: fc.integer({ min: 0, max: 12 }) })
)
const queries = fc.array(text, { minLength: 1, maxLength: 4 })

type Op =
  | { kind: "upsert"; id: number; text: string; title: string | undefined }
  | { kind: "remove"; id: number }

const apply = (ops: ReadonlyArray<Op>) => {
  const index = SearchIndex.make()
  const live = new Map<string, Document>()
  for (const o of ops) {
    const id = `d${o.id}`
    if (o.kind === "upsert") {
      const doc = {
        id,
        text: o.text,
        ...(o.title === undefined ? {} : { title: o.title }),
        meta: { n: o.id }
      }
      index.upsert(doc)
      live.set(id, doc)
    } else {
      index.remove(id)
      live.delete(id)
    }
  }
  return { index, live }
}

describe("SearchIndex properties", () => {
  it("a snapshot round trip gives the same results", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), queries, (ops, qs) => {
        const { index } = apply(ops)
        const loaded = SearchIndex.fromJSON(JSON.stringify(index)).pipe(Either.getOrThrow)
        expect(loaded.size).toBe(index.size)
        for (const q of qs) expect(loaded.search(q, { limit: 20 })).toEqual(index.search(q, { limit: 20 }))
      }),
      { numRuns: 150 }
    )
  })

  it("edits leave no trace: the index scores like one built from the surviving documents", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), queries, (ops, qs) => {
        const { index, live } = apply(ops)
        const fresh = SearchIndex.fromDocuments([...live.values()])
        for (const q of qs) {
          const a = new Map(index.search(q, { limit: 50 }).map((h) => [h.id, h.score]))
          const b = new Map(fresh.search(q, { limit: 50 }).map((h) => [h.id, h.score]))
          expect([...a.keys()].sort()).toEqual([...b.keys()].sort())
          for (const [id, score] of a) expect(score).toBeCloseTo(b.get(id)!, 9)
        }
      }),
      { numRuns: 150 }
    )
  })

  it("hits are sorted best first with ties by id, and never exceed the limit", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 30 }), text, fc.integer({ min: 1, max: 5 }), (ops, q, limit) => {
        const hits = apply(ops).index.search(q, { limit })
        expect(hits.length).toBeLessThanOrEqual(limit)
        for (let i = 1; i < hits.length; i++) {
          const [p, h] = [hits[i - 1]!, hits[i]!]
          expect(p.score > h.score || (p.score === h.score && p.id < h.id)).toBe(true)
        }
      })
    )
  })
})
