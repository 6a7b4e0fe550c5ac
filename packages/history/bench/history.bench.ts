/**
 * History costs on long sessions (no model call): appending a step (in memory and through the file
 * store, which appends one record to the session's journal and fdatasyncs it), and the compaction
 * decision plus selection (trigger, turn grouping, budget-limited plan). Cold is the first call in
 * this process; warm is the median of repeated calls. Reported per history length, with growth from
 * 1k to 10k messages. Then one recorded step on a 200- and a 2,000-message session: the whole-file
 * rewrite of messages.json that each step used to cost (JSON text, temporary file, fsync, rename)
 * against the journal's append, with the ratio.
 */

import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { performance } from "node:perf_hooks"
import * as Store from "@ctxo/store/Store"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Effect } from "effect"
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
/**
 * The history of a data root whose sessions are made with `doc` written whole as messages.json
 * (not as one journal record of the whole document: that would be folded in the background while
 * the steps are timed).
 */
const withSession = <A>(
  session: string,
  doc: HistoryDocument,
  f: (history: HistoryStore.Service) => Effect.Effect<A, unknown>
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const store = yield* Store.makeScoped(root)
      mkdirSync(join(root, session), { recursive: true })
      yield* store.writeHistory(session, `${JSON.stringify(doc, null, 2)}\n`)
      return yield* f(HistoryStore.fromStore(store))
    })
  )

for (const size of sizes) {
  const doc = build(size)
  const appendCold = time(() => appendOnce(doc))
  const appendWarm = median(Array.from({ length: rounds * 10 }, () => time(() => appendOnce(doc))))
  const decideCold = time(() => decide(doc))
  const decideWarm = median(Array.from({ length: rounds * 4 }, () => time(() => decide(doc))))
  const fileTimes = await Effect.runPromise(
    withSession(`s${size}`, doc, (store) =>
      Effect.gen(function* () {
        const times: Array<number> = []
        for (let i = 0; i <= rounds; i++) {
          const start = performance.now()
          yield* store.modify(`s${size}`, (current) =>
            Effect.succeed([undefined, appendOnce(current)] as const)
          )
          times.push(performance.now() - start)
        }
        return times
      })
    )
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
/** One recorded step, both ways: the median of `rounds * 4` steps each. */
const stepRows: Array<{ size: number; rewrite: number; journal: number }> = []
for (const size of [200, 2_000]) {
  const doc = build(size)
  const steps = rounds * 4
  const rewrite = await Effect.runPromise(
    Effect.gen(function* () {
      const file = join(root, `rewrite${size}`, "messages.json")
      let current = doc
      yield* HistoryStore.writeFileAtomic(file, `${JSON.stringify(current, null, 2)}\n`)
      const times: Array<number> = []
      for (let i = 0; i < steps; i++) {
        current = appendOnce(current)
        const start = performance.now()
        // What modify did per step before the journal: the whole document as text, written atomically.
        yield* HistoryStore.writeFileAtomic(file, `${JSON.stringify(current, null, 2)}\n`)
        times.push(performance.now() - start)
      }
      return median(times)
    }).pipe(Effect.provide(NodeContext.layer))
  )
  const journal = await Effect.runPromise(
    withSession(`journal${size}`, doc, (store) =>
      Effect.gen(function* () {
        const times: Array<number> = []
        for (let i = 0; i < steps; i++) {
          const start = performance.now()
          yield* store.modify(`journal${size}`, (current) =>
            Effect.succeed([undefined, appendOnce(current)] as const)
          )
          times.push(performance.now() - start)
        }
        return median(times)
      })
    )
  )
  stepRows.push({ size, rewrite, journal })
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
console.log("")
console.log(
  "one recorded step (file store) | rewrite messages.json (before) | journal append (now) | ratio   (ms, median)"
)
for (const r of stepRows) {
  console.log(
    `${`${r.size.toLocaleString("en-US")} messages`.padStart(30)} | ${f(r.rewrite).padStart(30)} | ${f(r.journal).padStart(20)} | ${(r.rewrite / r.journal).toFixed(1)}x`
  )
}
