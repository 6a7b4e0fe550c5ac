/**
 * Aggregating many sessions into one request (`@ctxo/agent/Aggregate`) against what it is made of:
 *   baseline:  the 20 sessions compiled one by one for the query (the turn engine's preview, as
 *              the aggregate compiles each);
 *   aggregate: the same compiles, then the blocks read back, merged, ranked, cut to one budget,
 *              rendered and counted, and the sessions' L2 promoted to L3.
 * The promotion step alone (`Memory.aggregate`) is timed too: it reads every session's history
 * and judges its turns, a large part of the aggregate's own work.
 * 20 sessions × 200 finished turns (generated deterministically with `@ctxo/history/Turns` on a
 * memory store), every fifth session sharing a knowledge file and every tenth turn one the
 * sessions have in common; gpt-4o (115,200 tokens available), so the aggregate must cut. Warm:
 * one round of each first, then `CTXO_BENCH_ROUNDS` rounds (default 5), p50 of each; the ratio
 * is aggregate / baseline.
 */
import { performance } from "node:perf_hooks"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import * as CompileCache from "@ctxo/compiler/CompileCache"
import * as Workspace from "@ctxo/compiler/Workspace"
import * as HistoryStore from "@ctxo/history/HistoryStore"
import type { HistoryDocument } from "@ctxo/history/Message"
import * as Summarizer from "@ctxo/history/Summarizer"
import { beginTurn, finishTurn } from "@ctxo/history/Turns"
import * as MemoryStore from "@ctxo/store/MemoryStore"
import * as Store from "@ctxo/store/Store"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as Aggregate from "../src/Aggregate.ts"
import * as Memory from "../src/Memory.ts"
import * as TurnEngine from "../src/TurnEngine.ts"

const rounds = Math.max(1, Number(process.env.CTXO_BENCH_ROUNDS ?? 5))
const SESSIONS = 20
const TURNS = 200
const MODEL = "gpt-4o"
const QUERY = "When does the Kestrel release ship, and who owns the rollback?"

const words =
  "context budget compile history turn token block model window summary reference policy layer dashboard pipeline deploy review".split(
    " "
  )
const sentence = (seed: number, n: number) =>
  Array.from({ length: n }, (_, i) => words[(seed * 7 + i * 13) % words.length]).join(" ")

/** A session's history: its own turns, and every tenth turn one all sessions have. */
const historyOf = (s: number): string => {
  let doc: HistoryDocument = { format: "ctxo.history/v1", messages: [], compression: [] }
  for (let t = 1; t <= TURNS; t++) {
    const common = t % 10 === 0
    const input = common
      ? `Please remember: the Kestrel release ${t / 10} ships on 2026-12-${String((t / 10) % 28 || 1).padStart(2, "0")}.`
      : `Session ${s} turn ${t}: ${sentence(s * 1_000 + t, 24)}?`
    const answer = common
      ? `Noted: Kestrel ${t / 10} ships then; the platform team owns the rollback.`
      : `About ${sentence(s * 1_000 + t + 1, 30)}.`
    const b = beginTurn(doc, { input })
    doc = finishTurn(b.doc, b.turn, answer).doc
  }
  return JSON.stringify(doc)
}

const store = MemoryStore.makeMemory({
  global: { "system-prompt.md": "You are the release agent. Answer from the sessions' context." }
})
const ids = Array.from({ length: SESSIONS }, (_, s) => `s${String(s).padStart(2, "0")}`)
const setup = Effect.gen(function* () {
  for (const [s, id] of ids.entries()) {
    yield* store.createSession({ id, concept: `bench ${id}` })
    yield* store.writeFile(id, "context-config.json", JSON.stringify({ knowledge: [{ path: "notes.md" }] }))
    yield* store.writeFile(
      id,
      "notes.md",
      s % 5 === 0
        ? "# Releases\n\nKestrel ships after the freeze; the platform team owns the rollback.\n"
        : `# Notes of ${id}\n\n${sentence(s, 60)}.\n`
    )
    yield* store.writeHistory(id, historyOf(s))
  }
})

const base = Layer.mergeAll(
  Layer.succeed(Store.Store, store),
  Layer.succeed(HistoryStore.HistoryStore, HistoryStore.fromStore(store)),
  Layer.succeed(Workspace.Workspace, Workspace.fromStore(store)),
  Summarizer.layerDeterministic,
  ModelRegistry.layer(),
  Tokenizer.layer(),
  TurnEngine.seamsLive,
  // One compile cache for the process, as a gateway has.
  CompileCache.layer
)
const runtime = ManagedRuntime.make(
  // The engine draws on memory in each compile, as a gateway's does.
  TurnEngine.layer.pipe(Layer.provideMerge(Memory.layer()), Layer.provideMerge(base))
)

const baseline = Effect.gen(function* () {
  const engine = yield* TurnEngine.TurnEngine
  let tokens = 0
  for (const id of ids) {
    const compiled = yield* engine.preview({ sessionId: id, input: QUERY, model: MODEL, defaultModel: MODEL })
    tokens += compiled.report.total ?? 0
  }
  return tokens
})
const aggregate = Aggregate.aggregate({ sessions: ids, query: QUERY, model: MODEL, defaultModel: MODEL })
/** The promotion step alone (the sessions' L2 into L3), which the aggregate includes. */
const promote = Effect.flatMap(Memory.Memory, (memory) => memory.aggregate(ids))

type Services = ManagedRuntime.ManagedRuntime.Context<typeof runtime>
const time = async <A, E>(effect: Effect.Effect<A, E, Services>) => {
  const start = performance.now()
  const value = await runtime.runPromise(effect)
  return { ms: performance.now() - start, value }
}
const p50 = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor((sorted.length - 1) / 2)]!
}

await runtime.runPromise(setup)
// Warm-up: each once (caches of the compiles, the ranker's indexes, the tokenizer's counts).
const firstBaseline = await time(baseline)
const first = await time(aggregate)
const baselineTimes: Array<number> = []
const aggregateTimes: Array<number> = []
const promoteTimes: Array<number> = []
for (let r = 0; r < rounds; r++) {
  baselineTimes.push((await time(baseline)).ms)
  aggregateTimes.push((await time(aggregate)).ms)
  promoteTimes.push((await time(promote)).ms)
}
await runtime.dispose()

const result = first.value
const kept = result.blocks.filter((b) => b.status === "included")
const shared = result.blocks.filter((b) => b.sessions.length > 1)
const baselineMs = p50(baselineTimes)
const aggregateMs = p50(aggregateTimes)
const row = (name: string, ms: number, what: string) =>
  `${name.padEnd(40)} ${ms.toFixed(1).padStart(9)} ${(ms / baselineMs).toFixed(2).padStart(7)}x  ${what}`

console.log(
  `aggregate: ${SESSIONS} sessions × ${TURNS} turns for ${result.model}, warm p50 of ${rounds} rounds (first round: baseline ${firstBaseline.ms.toFixed(0)} ms, aggregate ${first.ms.toFixed(0)} ms)`
)
console.log("")
console.log(`${"".padEnd(40)} ${"p50 ms".padStart(9)} ${"ratio".padStart(8)}  what`)
console.log(
  row(
    "baseline: 20 compiles one by one",
    baselineMs,
    `${firstBaseline.value} tokens in 20 requests, each within its window`
  )
)
console.log(
  row(
    "aggregate_context",
    aggregateMs,
    `one request of ${result.report.total} of ${result.report.available} tokens: ${kept.length} of ${result.blocks.length} blocks kept, ${shared.length} from several sessions`
  )
)
console.log(
  row(
    "  of which L2 -> L3 (Memory.aggregate)",
    p50(promoteTimes),
    `${result.promoted} L3 entries: every session's history read and its turns' importance judged`
  )
)
console.log("")
console.log(
  `aggregate costs ${(aggregateMs / baselineMs).toFixed(2)}x the 20 compiles it is made of (+${(aggregateMs - baselineMs).toFixed(1)} ms for reading back, merging, ranking, fitting, rendering and promoting)`
)
