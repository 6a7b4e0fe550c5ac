// What the gateway sent the model for this question (read from the fake upstream's log), checked
// with rules written here, independent of the code that builds it. With a session the turn engine
// compiled it: the system prompt first and whole, the question exactly once (as the last user
// message), every tool call answered right after it, and the request within the model's window
// less its output reserve (gpt-4o: 128,000 − 10%), counted again with gpt-tokenizer's o200k_base.
// Without a session (the fitting proxy) the client's one message is forwarded as sent.
import { readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { encode } from "gpt-tokenizer/encoding/o200k_base"

const here = dirname(fileURLToPath(import.meta.url))
const systemPrompt = readFileSync(join(here, "../../fixtures/data/system-prompt.md"), "utf8").trim()
const AVAILABLE = 128_000 - 12_800

const text = (content) =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
      ? content.map((p) => (typeof p?.text === "string" ? p.text : "")).join("")
      : ""

const problems = (messages, question, session) => {
  const out = []
  const users = messages.filter((m) => m.role === "user" && text(m.content).startsWith(question))
  if (users.length !== 1) out.push(`input-once: the question is in ${users.length} user messages, not 1`)
  if (!session) {
    if (messages.length !== 1) out.push(`proxy: ${messages.length} messages forwarded, the client sent 1`)
    return out
  }
  if (messages[0]?.role !== "system" || text(messages[0].content).trim() !== systemPrompt)
    out.push(
      `order: the first message is not the system prompt (${messages[0]?.role}: ${text(messages[0]?.content).slice(0, 60)})`
    )
  const last = [...messages].reverse().find((m) => m.role === "user")
  if (last === undefined || !text(last.content).startsWith(question))
    out.push("order: the question is not the last user message")
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]
    if (m.role === "assistant" && Array.isArray(m.tool_calls)) {
      const answered = new Set()
      for (let j = i + 1; j < messages.length && messages[j].role === "tool"; j++)
        answered.add(messages[j].tool_call_id)
      const missing = m.tool_calls.filter((c) => !answered.has(c.id))
      if (missing.length > 0) out.push(`tool-pairs: call ${missing[0].id} has no result right after it`)
    }
    if (
      m.role === "tool" &&
      !(
        messages
          .slice(0, i)
          .reverse()
          .find((x) => x.role !== "tool")?.tool_calls ?? []
      ).some((c) => c.id === m.tool_call_id)
    )
      out.push(`tool-pairs: result ${m.tool_call_id} does not follow its call`)
  }
  let tokens = 3
  for (const m of messages) {
    tokens += 4 + encode(text(m.content)).length
    for (const c of m.tool_calls ?? [])
      tokens += 3 + encode(c.function.name).length + encode(c.function.arguments).length
  }
  if (tokens > AVAILABLE) out.push(`budget: ${tokens} tokens (o200k_base), over the ${AVAILABLE} available`)
  return out
}

// The compacting session (run.ts seeds it over the trigger, with an earlier summary): after the
// compaction its first question causes, the model still gets the earlier summary word for word (a
// summary is never compressed again) and at least the last 10 turns (design.md: compaction keeps
// the last 10 whole turns by default; gpt-4o has room for them).
const EARLIER_SUMMARY_LINE =
  "* **Original Goal**: migrate the billing service to the new ledger API (kept word for word: LEDGER-MIGRATION-7731)"
const KEEP_TURNS = 10
const compactionProblems = (messages) => {
  const out = []
  if (!messages.some((m) => m.role === "system" && text(m.content).includes(EARLIER_SUMMARY_LINE)))
    out.push("keep-turns: the earlier summary did not reach the model word for word (compressed again?)")
  // The compaction happened: the oldest live turn (3) was archived, so it no longer reaches the model.
  if (messages.some((m) => m.role === "user" && text(m.content) === "step 3 of the long task"))
    out.push("keep-turns: turn 3 still reached the model: the session over its trigger did not compact")
  const turns = messages.filter(
    (m) => m.role === "user" && /^step \d+ of the long task$/.test(text(m.content))
  )
  if (turns.length < KEEP_TURNS)
    out.push(
      `keep-turns: ${turns.length} earlier turns reached the model after compaction, fewer than ${KEEP_TURNS}`
    )
  return out
}
const isLongTask = (body) => body.messages.some((m) => /^step \d+ of the long task$/.test(text(m.content)))

export default (_output, context) => {
  const question = context.vars.question
  const label = context.provider?.label
  const session = label !== "gateway-proxy"
  // The requests whose newest user message is this question (a later question's request has it in
  // its history).
  const sent = readFileSync(join(here, "../.out/upstream.jsonl"), "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line))
    .filter((body) =>
      text([...body.messages].reverse().find((m) => m.role === "user")?.content).startsWith(question)
    )
  if (!session) {
    // The fitting proxy forwards the client's one message as sent.
    return sent.some((body) => body.messages.length === 1)
      ? { pass: true, score: 1, reason: "the client's message was forwarded as sent" }
      : {
          pass: false,
          score: 0,
          reason: "proxy: no upstream request carried the client's one message as sent"
        }
  }
  const compacting = label === "gateway-compacting"
  const compiled = sent.filter((body) => body.messages.length > 1 && isLongTask(body) === compacting)
  if (compiled.length === 0)
    return {
      pass: false,
      score: 0,
      reason: "the model was never sent this question with the session's context"
    }
  const found = compiled.flatMap((body) => [
    ...problems(body.messages, question, true),
    ...(compacting ? compactionProblems(body.messages) : [])
  ])
  return found.length === 0
    ? { pass: true, score: 1, reason: `${compiled.length} upstream request(s) checked` }
    : { pass: false, score: 0, reason: [...new Set(found)].slice(0, 3).join("; ") }
}
