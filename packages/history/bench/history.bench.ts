/**
 * History costs on long sessions (no model call): appending a step (in memory and through the file
 * store, which rewrites messages.json atomically), and the compaction decision plus selection
 * (trigger, turn grouping, budget-limited plan). Cold is the first call in this process; warm is
 * the median of repeated calls. Reported per history length, with growth from 1k to 10k messages.
 */

import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { performance } from "node:perf_hooks"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Effect, Layer } from "effect"
import { messageText, planCompaction, shouldCompact } from "../src/Compaction.ts"
import * as HistoryStore from "../src/HistoryStore.ts"
import type { HistoryDocument } from "../src/Message.ts"
import { emptyHistory } from "../src/Message.ts"
import { appendStep, appendToolResult, beginTurn, finishTurn } from "../src/Turns.ts"

const rounds = Number(process.env.CTXO_BENCH_ROUNDS ?? 5)
const sizes = [1_000, 2_000, 5_000, 10_000]

const build = (messages: number): HistoryDocument => {
  let doc = emptyHistory
  for (let t = 0; doc.messages.length < messages; t++) {
    const began = beginTurn(doc, { input: `question ${t}: ${"why does the build fail ".repeat(4)}` })
    doc = appendStep(began.doc, began.turn, {
      text: "Thought: read the log\nAction: Bash[pnpm build]",
      toolCall: { callId: `c${t}`, name: "Bash", input: { command: "pnpm build" } }
    }).doc
    doc = appendToolResult(doc, began.turn, {
      callId: `c${t}`,
      name: "Bash",
      status: "success",
      data: { command: "pnpm build", exitCode: 0, stdout: "120 lines", stderrTail: "warning ".repeat(40) }
    }).doc
    doc = finishTurn(doc, began.turn, `answer ${t}: ${"the fix is ".repeat(10)}`).doc
  }
  return doc
}

const time = (f: () => void) => {
  const start = performance.now()
  f()
  return performance.now() - start
}
const median = (values: ReadonlyArray<number>) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

const appendOnce = (doc: HistoryDocument) => {
  const turn = doc.messages.at(-1)!.meta.turn
  return appendStep(doc, turn, { text: "Thought: one more step" }).doc
}
const decide = (doc: HistoryDocument) => {
  const decision = shouldCompact({
    lastUsage: 150_000,
    input: "next question",
    window: 200_000,
    messageCount: doc.messages.length
  })
  return planCompaction(doc, {
    keepTurns: 10,
    budget: decision.threshold - 50_000,
    countMessages: (ms) => ms.reduce((n, m) => n + Math.ceil(messageText(m).length / 3), 0)
  })
}

interface Row {
  size: number
  appendCold: number
  appendWarm: number
  fileCold: number
  fileWarm: number
  decideCold: number
  decideWarm: number
}
const rows: Array<Row> = []
const root = mkdtempSync(join(tmpdir(), "ctxo-history-bench-"))
// Removed however the run ends (done or failed).
process.on("exit", () => rmSync(root, { recursive: true, force: true }))
const files = HistoryStore.layerFile(root).pipe(Layer.provide(NodeContext.layer))

for (const size of sizes) {
  const doc = build(size)
  const appendCold = time(() => appendOnce(doc))
  const appendWarm = median(Array.from({ length: rounds * 10 }, () => time(() => appendOnce(doc))))
  const decideCold = time(() => decide(doc))
  const decideWarm = median(Array.from({ length: rounds * 4 }, () => time(() => decide(doc))))
  const fileTimes = await Effect.runPromise(
    Effect.gen(function* () {
      const store = yield* HistoryStore.HistoryStore
      const session = `s${size}`
      mkdirSync(join(root, session), { recursive: true })
      yield* store.modify(session, () => Effect.succeed([undefined, doc] as const))
      const times: Array<number> = []
      for (let i = 0; i <= rounds; i++) {
        const start = performance.now()
        yield* store.modify(session, (current) => Effect.succeed([undefined, appendOnce(current)] as const))
        times.push(performance.now() - start)
      }
      return times
    }).pipe(Effect.provide(files), Effect.scoped)
  )
  rows.push({
    size,
    appendCold,
    appendWarm,
    fileCold: fileTimes[0]!,
    fileWarm: median(fileTimes.slice(1)),
    decideCold,
    decideWarm
  })
}
rmSync(root, { recursive: true, force: true })

const f = (ms: number) => ms.toFixed(ms < 1 ? 3 : 1).padStart(9)
console.log(
  "history length | append step (memory) cold / warm | append step (file store) cold / warm | compaction decision + selection cold / warm   (ms)"
)
for (const r of rows) {
  console.log(
    `${String(r.size).padStart(14)} | ${f(r.appendCold)} / ${f(r.appendWarm)} | ${f(r.fileCold)} / ${f(r.fileWarm)} | ${f(r.decideCold)} / ${f(r.decideWarm)}`
  )
}
const first = rows[0]!
const last = rows.at(-1)!
console.log(
  `growth 1k -> 10k messages (10x): append ${(last.appendWarm / first.appendWarm).toFixed(1)}x, file append ${(last.fileWarm / first.fileWarm).toFixed(1)}x, decision + selection ${(last.decideWarm / first.decideWarm).toFixed(1)}x`
)
