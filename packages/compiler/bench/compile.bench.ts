/**
 * Compiling a long session, side by side in one run:
 *   ctxo compile: a code-agent session of 2,000 messages (~150k tokens) and 50 knowledge files,
 *                 for gpt-4o (128k window, so history must be trimmed), cold and warm;
 *   baseline:     LangChain.js `trimMessages` (@langchain/core) on the same history, with the same
 *                 tokenizer (o200k_base) and the same history budget: what a user would pick;
 *   floor:        `JSON.stringify` of the compiled request.
 * Warm compiles get the previous compile's state (its history cut), as a gateway passes it, and
 * share one `CompileCache` with the cold one, as a gateway's compiles do.
 * Targets: warm compile at least 10x faster than the baseline and within 5x of the floor.
 */

import { createRequire } from "node:module"
import { performance } from "node:perf_hooks"
import {
  AIMessage,
  type BaseMessage,
  HumanMessage,
  SystemMessage,
  ToolMessage,
  trimMessages
} from "@langchain/core/messages"
import { makeLongSession } from "./longSession.ts"

const rounds = Number(process.env.CTXO_BENCH_ROUNDS ?? 5)
const median = (values: ReadonlyArray<number>) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
const timed = async <A>(f: () => Promise<A>) => {
  const start = performance.now()
  const value = await f()
  return { ms: performance.now() - start, value }
}

// --- ctxo (one compile cache for the run, as in a gateway)
const { doc, run, dispose } = await makeLongSession()
const cold = await timed(() => run())
// Warm compiles are cheap: measure as many as the floor gets (steady state for both).
const warmRounds = rounds * 10
const warm: Array<number> = []
let result = cold.value
for (let i = 0; i < warmRounds; i++) {
  const previous = result.state
  const r = await timed(() => run(previous))
  warm.push(r.ms)
  result = r.value
}
if (process.env.CTXO_BENCH_ONLY_CTXO === "1") {
  console.log(`ctxo compile cold ${cold.ms.toFixed(1)} ms, warm ${median(warm).toFixed(1)} ms`)
  await dispose()
  process.exit(0)
}
const totalHistory = result.report.units
  .filter((u) => u.source === "recent_history")
  .reduce((n, u) => n + u.tokens, 0)
const historyGrant = result.report.sources.find((s) => s.id === "recent_history")!.grant

// --- baseline: LangChain trimMessages, same tokenizer (o200k_base), same history budget
const gpt = createRequire(import.meta.url)("gpt-tokenizer/encoding/o200k_base") as {
  countTokens(text: string, options: { disallowedSpecial: Set<string> }): number
}
const ordinary = { disallowedSpecial: new Set<string>() }
const toLangChain = (): Array<BaseMessage> => [
  new SystemMessage("You are a patient tutor."),
  ...doc.messages.map((m) => {
    const text = m.parts
      .filter((p) => p._tag === "text")
      .map((p) => (p as { text: string }).text)
      .join("")
    if (m.role === "user") return new HumanMessage(text)
    if (m.role === "tool") {
      const r = m.parts[0] as { callId: string; status: string; data: unknown }
      return new ToolMessage({
        tool_call_id: r.callId,
        content: JSON.stringify({ status: r.status, data: r.data })
      })
    }
    const calls = m.parts.filter((p) => p._tag === "tool-call") as Array<{
      callId: string
      name: string
      input: Record<string, unknown>
    }>
    return new AIMessage({
      content: text,
      tool_calls: calls.map((c) => ({ id: c.callId, name: c.name, args: c.input }))
    })
  })
]
const tokenCounter = (messages: Array<BaseMessage>) =>
  messages.reduce((n, m) => {
    const content = typeof m.content === "string" ? m.content : JSON.stringify(m.content)
    const calls = (m as AIMessage).tool_calls ?? []
    return (
      n +
      3 +
      gpt.countTokens(content, ordinary) +
      calls.reduce((k, c) => k + gpt.countTokens(JSON.stringify(c.args), ordinary), 0)
    )
  }, 0)
// trimMessages keeps no cache (its cold and warm runs cost the same) and takes seconds: fewer rounds.
const baselineTimes: Array<number> = []
const baselineRounds = Math.max(1, Math.ceil(rounds / 5))
for (let i = 0; i < baselineRounds; i++) {
  const messages = toLangChain()
  const r = await timed(() =>
    trimMessages(messages, {
      maxTokens: historyGrant,
      strategy: "last",
      tokenCounter,
      startOn: "human",
      includeSystem: true
    })
  )
  baselineTimes.push(r.ms)
}

// --- floor
const floorTimes: Array<number> = []
for (let i = 0; i < warmRounds; i++)
  floorTimes.push((await timed(async () => JSON.stringify(result.request))).ms)

await dispose()

const warmMs = median(warm)
const baselineMs = median(baselineTimes)
const floorMs = median(floorTimes)
console.log(
  `session: ${doc.messages.length} messages (${totalHistory} history tokens, o200k_base), 50 knowledge files; gpt-4o, history grant ${historyGrant}`
)
console.log(
  `ctxo compile   cold ${cold.ms.toFixed(1)} ms, warm ${warmMs.toFixed(1)} ms (median of ${warmRounds}); request ${result.report.total} tokens`
)
console.log(`baseline       LangChain trimMessages ${baselineMs.toFixed(1)} ms (median of ${baselineRounds})`)
console.log(`floor          JSON.stringify of the request ${floorMs.toFixed(2)} ms`)
console.log(
  `warm compile is ${(baselineMs / warmMs).toFixed(1)}x faster than the baseline (target >= 10x) and ${(warmMs / floorMs).toFixed(1)}x the floor (target <= 5x)`
)
