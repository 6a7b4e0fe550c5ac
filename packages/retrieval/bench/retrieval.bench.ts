/**
 * Retrieval quality and cost (no network, no model):
 * 1. the labelled knowledge set: recall@1 and recall@5 of the block that answers each question, BM25
 *    alone and hybrid with the LOCAL HASHED N-GRAM EMBEDDER (`Embedder.makeHashed`, a stand-in that
 *    is not a semantic model: it shows what the fusion costs or gives, not what a real embedding
 *    model would), with analyzer and title-boost variants;
 * 2. a 10,000-block index: build time, time per query (p50 / p99), snapshot size, and reloading a
 *    saved index against rebuilding it (SearchIndex alone and FileIndex with persistence);
 * 3. the conversation set: each turn is a document, each question a query; recall@5/10/20 of the
 *    evidence turns (share of a question's evidence turns found, averaged; and questions with all of
 *    their evidence found), per kind of question.
 * `CTXO_BENCH_ROUNDS` (default 5) scales the timing repetitions.
 */
import { performance } from "node:perf_hooks"
import { Effect } from "effect"
import * as Conversations from "../src/Conversations.ts"
import * as Embedder from "../src/Embedder.ts"
import * as FileIndex from "../src/FileIndex.ts"
import { rankByVector, reciprocalRankFusion } from "../src/Hybrid.ts"
import type { Document, Hit, IndexOptions } from "../src/SearchIndex.ts"
import { SearchIndex } from "../src/SearchIndex.ts"
import type { KnowledgeQuestion } from "./sets.ts"
import { knowledgeDocuments, knowledgeFiles, knowledgeQuestions } from "./sets.ts"

const rounds = Math.max(1, Number(process.env.CTXO_BENCH_ROUNDS ?? 5))
const hashed = Embedder.makeHashed({ dimensions: 256 })
const embed = (texts: ReadonlyArray<string>) => Effect.runSync(hashed.embed(texts))

const time = <A>(f: () => A): [A, number] => {
  const start = performance.now()
  const result = f()
  return [result, performance.now() - start]
}
const quantile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}
const ms = (x: number) => `${x < 1 ? x.toFixed(3) : x < 100 ? x.toFixed(2) : x.toFixed(0)} ms`
const pct = (x: number) => x.toFixed(3)
const kib = (bytes: number) => `${(bytes / 1024).toFixed(0)} KiB`
const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  const line = (cells: ReadonlyArray<string>) =>
    `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`
  console.log(line(header))
  console.log(`|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`)
  for (const row of rows) console.log(line(row))
  console.log()
}

/** A ranking function over documents: BM25 alone, or hybrid with precomputed document vectors. */
type Ranker = (query: string, limit: number) => ReadonlyArray<Hit>
const bm25Ranker =
  (index: SearchIndex): Ranker =>
  (query, limit) =>
    index.search(query, { limit })
const hybridRanker = (index: SearchIndex, docs: ReadonlyArray<Document>, candidates = 50): Ranker => {
  const vectors = embed(docs.map((d) => (d.title === undefined ? d.text : `${d.title}\n${d.text}`)))
  const entries = docs.map((d, i) => [d.id, vectors[i]!] as const)
  return (query, limit) => {
    const bm25 = index.search(query, { limit: Math.max(limit, candidates) })
    const byVector = rankByVector(embed([query])[0]!, entries, Math.max(limit, candidates))
    return reciprocalRankFusion({ rankings: [bm25, byVector], limit })
  }
}

// --- 1. knowledge set -----------------------------------------------------------------------------

const files = knowledgeFiles()
const documents = knowledgeDocuments(files)
const questions = knowledgeQuestions()

const recall = (ranker: Ranker, selection: ReadonlyArray<KnowledgeQuestion>, k: number) =>
  selection.filter((q) => ranker(q.question, k).some((h) => h.id === q.block)).length / selection.length

const slices: ReadonlyArray<readonly [string, ReadonlyArray<KnowledgeQuestion>]> = [
  ["all", questions],
  ["en", questions.filter((q) => q.lang === "en")],
  ["zh", questions.filter((q) => q.lang === "zh")],
  ["body only", questions.filter((q) => q.kind === "content")]
]
const variants: ReadonlyArray<readonly [string, IndexOptions, boolean]> = [
  ["BM25 (defaults: folding, CJK pairs, title boost 1)", {}, false],
  ["hybrid: BM25 + LOCAL HASHED stand-in embedder, RRF", {}, true],
  ["BM25, no English suffix folding", { analyzer: { stem: false } }, false],
  ["BM25, no CJK character pairs", { analyzer: { cjkBigrams: false } }, false],
  ["BM25, title boost 1.5", { titleBoost: 1.5 }, false],
  ["BM25, title boost 2", { titleBoost: 2 }, false],
  ["BM25, title boost 3", { titleBoost: 3 }, false]
]
console.log(
  `## Knowledge set: ${documents.length} blocks in ${files.length} Markdown files, ${questions.length} questions (${slices.map(([n, s]) => `${n} ${s.length}`).join(", ")})\n`
)
const knowledgeRows: Array<Array<string>> = []
let bm25At5 = 0
let hybridAt5 = 0
for (const [name, options, hybrid] of variants) {
  const index = SearchIndex.fromDocuments(documents, options)
  const ranker = hybrid ? hybridRanker(index, documents) : bm25Ranker(index)
  const cells = slices.map(
    ([, selection]) => `${pct(recall(ranker, selection, 1))} / ${pct(recall(ranker, selection, 5))}`
  )
  if (name.startsWith("BM25 (defaults")) bm25At5 = recall(ranker, questions, 5)
  if (hybrid) hybridAt5 = recall(ranker, questions, 5)
  knowledgeRows.push([name, ...cells])
}
table(["ranking (recall@1 / recall@5)", ...slices.map(([n]) => n)], knowledgeRows)
console.log(
  `hybrid (local hashed stand-in) vs BM25, recall@5 over all questions: ${(hybridAt5 / bm25At5).toFixed(3)}x\n`
)

// --- 2. a 10,000-block index ----------------------------------------------------------------------

const conversations = Conversations.generateConversations()
const sentences = [
  ...documents.flatMap((d) => d.text.split(/(?<=[.!?。！？])\s*/)),
  ...conversations.flatMap((c) => Conversations.turnsOf(c).flatMap((t) => [t.user, t.assistant]))
].filter((s) => s.trim().length > 12)
const r = Conversations.makeRandom(17)
const BIG = 10_000
const bigDocs: Array<Document> = Array.from({ length: BIG }, (_, i) => {
  const body = Array.from({ length: r.int(3, 8) }, () => r.pick(sentences)).join(" ")
  return {
    id: `file${Math.floor(i / 20)}.md#block${i % 20}`,
    title: `Section ${i} / ${r.pick(sentences).slice(0, 40)}`,
    text: body,
    meta: { path: `file${Math.floor(i / 20)}.md` }
  }
})
const bigQueries = [
  ...questions.map((q) => q.question),
  ...conversations.flatMap((c) => c.questions.map((q) => q.question)).filter((_, i) => i % 5 === 0)
].slice(0, 100 * rounds)

const [big, buildMs] = time(() => SearchIndex.fromDocuments(bigDocs))
const queryTimes = (ranker: Ranker) => {
  for (const q of bigQueries.slice(0, 20)) ranker(q, 10) // warm-up
  return bigQueries.map((q) => time(() => ranker(q, 10))[1])
}
const bm25Times = queryTimes(bm25Ranker(big))
const [hybridBig, vectorBuildMs] = time(() => hybridRanker(big, bigDocs))
const hybridTimes = queryTimes(hybridBig)
const snapshotText = JSON.stringify(big)
const [, reloadMs] = time(() => SearchIndex.fromJSON(snapshotText))
const [, rebuildMs] = time(() => SearchIndex.fromDocuments(bigDocs))
// An edit makes the next search drop the removed postings first (one pass over the index).
big.upsert({ ...bigDocs[0]!, text: "edited text about rollbacks" })
const [, firstAfterEditMs] = time(() => big.search("rollback", { limit: 10 }))
const [, secondAfterEditMs] = time(() => big.search("rollback", { limit: 10 }))

// FileIndex: 500 files of 20 blocks, saved through an in-memory persistence, with hashed vectors.
const fileBlocks = new Map<string, Array<FileIndex.FileBlock>>()
for (const d of bigDocs) {
  const path = String(d.meta!.path)
  const list = fileBlocks.get(path) ?? []
  list.push({
    id: d.id.slice(path.length + 1),
    text: d.text,
    ...(d.title === undefined ? {} : { title: d.title })
  })
  fileBlocks.set(path, list)
}
const fileList = [...fileBlocks.keys()].map((path) => ({ path, version: "v1" }))
const fileIndexRun = (embedder: Embedder.Service | undefined) =>
  Effect.runSync(
    Effect.gen(function* () {
      let saved: string | undefined
      const persistence: FileIndex.Persistence = {
        load: Effect.sync(() => saved),
        save: (text) =>
          Effect.sync(() => {
            saved = text
          })
      }
      const blocksOf = (path: string) => Effect.succeed(fileBlocks.get(path)!)
      const options = { persistence, ...(embedder === undefined ? {} : { embedder }) }
      const t0 = performance.now()
      const first = yield* FileIndex.make(options)
      yield* first.sync(fileList, blocksOf)
      const syncMs = performance.now() - t0
      const t1 = performance.now()
      const restarted = yield* FileIndex.make(options)
      const report = yield* restarted.sync(fileList, blocksOf)
      const restartMs = performance.now() - t1
      if (report.unchanged !== fileList.length) throw new Error("the restart re-indexed files")
      return { syncMs, restartMs, bytes: Buffer.byteLength(saved ?? "") }
    })
  )
const plainFiles = fileIndexRun(undefined)
const vectorFiles = fileIndexRun(hashed)

console.log(
  `## A ${BIG.toLocaleString("en")}-block index (blocks sampled from the sets' sentences), ${bigQueries.length} queries\n`
)
table(
  ["measure", "value", "ratio"],
  [
    ["SearchIndex build (10k blocks)", ms(buildMs), ""],
    ["BM25 query p50 / p99", `${ms(quantile(bm25Times, 0.5))} / ${ms(quantile(bm25Times, 0.99))}`, ""],
    [
      "hybrid query p50 / p99 (local hashed embedder, brute-force cosine)",
      `${ms(quantile(hybridTimes, 0.5))} / ${ms(quantile(hybridTimes, 0.99))}`,
      `${(quantile(hybridTimes, 0.5) / quantile(bm25Times, 0.5)).toFixed(1)}x BM25 p50`
    ],
    ["embedding 10k blocks with the local stand-in", ms(vectorBuildMs), ""],
    ["SearchIndex snapshot (JSON)", kib(Buffer.byteLength(snapshotText)), ""],
    [
      "SearchIndex reload (fromJSON) vs rebuild",
      `${ms(reloadMs)} vs ${ms(rebuildMs)}`,
      `${(reloadMs / rebuildMs).toFixed(2)}x`
    ],
    [
      "first search after an edit (drops removed postings) / next search",
      `${ms(firstAfterEditMs)} / ${ms(secondAfterEditMs)}`,
      ""
    ],
    ["FileIndex first sync, 500 files (BM25 only)", ms(plainFiles.syncMs), ""],
    [
      "FileIndex restart over unchanged files (load + sync, no blocks read)",
      ms(plainFiles.restartMs),
      `${(plainFiles.restartMs / plainFiles.syncMs).toFixed(2)}x first sync`
    ],
    [
      "FileIndex saved size, BM25 only / with 256-d vectors",
      `${kib(plainFiles.bytes)} / ${kib(vectorFiles.bytes)}`,
      ""
    ],
    [
      "FileIndex with vectors: first sync / restart",
      `${ms(vectorFiles.syncMs)} / ${ms(vectorFiles.restartMs)}`,
      `${(vectorFiles.restartMs / vectorFiles.syncMs).toFixed(2)}x`
    ]
  ]
)

// --- 3. conversation set ----------------------------------------------------------------------------

const ks = [5, 10, 20] as const
const kinds = ["single-hop", "multi-hop", "temporal"] as const
type Tally = { questions: number; found: Record<number, number>; complete: Record<number, number> }
const newTally = (): Tally => ({
  questions: 0,
  found: { 5: 0, 10: 0, 20: 0 },
  complete: { 5: 0, 10: 0, 20: 0 }
})
const tallies = {
  bm25: new Map(kinds.map((k) => [k, newTally()])),
  hybrid: new Map(kinds.map((k) => [k, newTally()]))
}
let turnCount = 0
for (const conversation of conversations) {
  const [a, b] = conversation.speakers
  const docs: Array<Document> = Conversations.turnsOf(conversation).map((t) => ({
    id: String(t.turn),
    text: `${a}: ${t.user}\n${b}: ${t.assistant}`
  }))
  turnCount += docs.length
  const index = SearchIndex.fromDocuments(docs)
  for (const [name, ranker] of [
    ["bm25", bm25Ranker(index)],
    ["hybrid", hybridRanker(index, docs)]
  ] as const) {
    for (const q of conversation.questions) {
      const hits = ranker(q.question, 20).map((h) => Number(h.id))
      const tally = tallies[name].get(q.kind)!
      tally.questions++
      for (const k of ks) {
        const top = new Set(hits.slice(0, k))
        const found = q.evidence.filter((t) => top.has(t)).length
        tally.found[k]! += found / q.evidence.length
        if (found === q.evidence.length) tally.complete[k]!++
      }
    }
  }
}
const total = conversations.reduce((n, c) => n + c.questions.length, 0)
console.log(
  `## Conversation set: ${conversations.length} conversations, ${turnCount} turns (one document each), ${total} questions\n`
)
const conversationRows: Array<Array<string>> = []
for (const name of ["bm25", "hybrid"] as const) {
  const rows = [...kinds.map((k) => [k, tallies[name].get(k)!] as const)]
  const all = newTally()
  for (const [, t] of rows) {
    all.questions += t.questions
    for (const k of ks) {
      all.found[k]! += t.found[k]!
      all.complete[k]! += t.complete[k]!
    }
  }
  for (const [kind, t] of [...rows, ["all", all] as const]) {
    conversationRows.push([
      name === "bm25" ? "BM25" : "hybrid (local hashed stand-in)",
      kind,
      String(t.questions),
      ...ks.map((k) => `${pct(t.found[k]! / t.questions)} / ${pct(t.complete[k]! / t.questions)}`)
    ])
  }
}
table(
  ["ranking", "questions", "n", ...ks.map((k) => `recall@${k} (evidence / all evidence)`)],
  conversationRows
)
