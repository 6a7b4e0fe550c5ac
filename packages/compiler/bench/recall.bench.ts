/**
 * Recall of earlier turns (issue 17), side by side in one run on the labelled long conversations
 * of `@ctxo/retrieval/Conversations` (10 two-person conversations, 19-32 sittings, ~1,500
 * questions with their evidence turns):
 *   ctxo:     compile with recall (the default): the newest turns, and earlier turns ranked by
 *             relevance to the question in the memory shares;
 *   baseline: the same compile with recency alone (a ranker that finds nothing): what ctxo did
 *             before recall;
 * for an 8k model (openai/gpt-4, 8,192 tokens). A question counts when every one of its evidence
 * turns is in the compiled request (in the conversation, or recalled). Target: 90% with recall.
 * Also printed: time per compile (warm, one shared `CompileCache`), as a ratio to recency alone.
 * `CTXO_BENCH_ROUNDS` below 5 (the CI smoke run) takes 3 questions per round and conversation.
 */
import { performance } from "node:perf_hooks"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import type { HistoryDocument } from "@ctxo/history/Message"
import { beginTurn, finishTurn } from "@ctxo/history/Turns"
import type { Conversation } from "@ctxo/retrieval/Conversations"
import { generateConversations } from "@ctxo/retrieval/Conversations"
import { Layer, ManagedRuntime } from "effect"
import { compile } from "../src/Compile.ts"
import * as CompileCache from "../src/CompileCache.ts"
import * as Workspace from "../src/Workspace.ts"

const MODEL = "openai/gpt-4"
const rounds = Number(process.env.CTXO_BENCH_ROUNDS ?? 5)
const perConversation = rounds < 5 ? rounds * 3 : Number.POSITIVE_INFINITY

const historyOf = (c: Conversation): HistoryDocument => {
  let doc: HistoryDocument = { format: "ctxo.history/v1", messages: [], compression: [] }
  for (const sitting of c.sittings)
    for (const t of sitting.turns) {
      const b = beginTurn(doc, { input: t.user })
      doc = finishTurn(b.doc, b.turn, t.assistant).doc
    }
  return doc
}

const conversations = generateConversations()
const runtime = ManagedRuntime.make(
  Layer.mergeAll(
    Workspace.layerMemory({ global: {}, sessions: { bench: {} } }),
    ModelRegistry.layer(),
    Tokenizer.layer(),
    CompileCache.layer
  )
)

interface Tally {
  questions: number
  found: number
  ms: Array<number>
  byKind: Map<string, { questions: number; found: number }>
}
const tally = (): Tally => ({ questions: 0, found: 0, ms: [], byKind: new Map() })
const withRecall = tally()
const recency = tally()

const measure = async (
  t: Tally,
  history: HistoryDocument,
  question: string,
  evidence: ReadonlyArray<number>,
  kind: string,
  recall: boolean
) => {
  const start = performance.now()
  const result = await runtime.runPromise(
    compile({
      sessionId: "bench",
      history,
      query: question,
      model: MODEL,
      ...(recall ? {} : { rank: () => [] })
    })
  )
  t.ms.push(performance.now() - start)
  const shown = new Set(
    result.report.units
      .filter(
        (u) => u.status !== "dropped" && (u.source === "recent_history" || u.source === "recalled_history")
      )
      .map((u) => Number(u.id.replace(/^(recalled-)?turn-/, "")))
  )
  const ok = evidence.every((e) => shown.has(e))
  t.questions++
  if (ok) t.found++
  const k = t.byKind.get(kind) ?? { questions: 0, found: 0 }
  k.questions++
  if (ok) k.found++
  t.byKind.set(kind, k)
}

for (const c of conversations) {
  const history = historyOf(c)
  const questions = c.questions.slice(0, perConversation)
  for (const q of questions) {
    await measure(withRecall, history, q.question, q.evidence, q.kind, true)
    await measure(recency, history, q.question, q.evidence, q.kind, false)
  }
}
await runtime.dispose()

const pct = (n: number, d: number) => `${((100 * n) / Math.max(1, d)).toFixed(1)}%`
const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] ?? 0
}
const turns = conversations.reduce((n, c) => n + c.sittings.reduce((m, s) => m + s.turns.length, 0), 0)
console.log(
  `recall of earlier turns: ${conversations.length} conversations, ${turns} turns, ${withRecall.questions} questions, ${MODEL} (8,192 tokens)`
)
console.log("")
console.log(`${"".padEnd(26)} ${"evidence in context".padStart(20)} ${"compile p50".padStart(12)}`)
for (const [name, t] of [
  ["recency alone (baseline)", recency],
  ["recency + recall (ctxo)", withRecall]
] as const)
  console.log(
    `${name.padEnd(26)} ${pct(t.found, t.questions).padStart(20)} ${`${median(t.ms).toFixed(2)} ms`.padStart(12)}`
  )
console.log("")
for (const kind of [...withRecall.byKind.keys()].sort()) {
  const a = withRecall.byKind.get(kind)!
  const b = recency.byKind.get(kind)!
  console.log(
    `  ${kind.padEnd(12)} ${String(a.questions).padStart(5)} questions: ${pct(b.found, b.questions)} -> ${pct(a.found, a.questions)}`
  )
}
console.log("")
console.log(
  `ratios: evidence found ${(withRecall.found / Math.max(1, recency.found)).toFixed(2)}x recency alone; compile time ${(median(withRecall.ms) / Math.max(1e-9, median(recency.ms))).toFixed(2)}x (target: >= 90% found)`
)
