/**
 * Regenerates the example histories in fixtures/data (messages.json of both sessions) with the
 * history package, so they always match its format:
 *   node --import tsx/esm scripts/example-history.ts ../../fixtures/data
 */
import { writeFileSync } from "node:fs"
import { emptyHistory } from "@ctxo/history/Message"
import { compressToolResult } from "@ctxo/history/ToolResultCompressor"
import { appendStep, appendToolResult, beginTurn, finishTurn } from "@ctxo/history/Turns"

const root = process.argv[2]!
let doc = emptyHistory
let b = beginTurn(doc, { input: "薛定谔方程里的 ħ 是什么？", now: "2026-11-01T09:05:00.000Z" })
doc = finishTurn(b.doc, b.turn, "ħ 是约化普朗克常数，ħ = h / 2π。它把能量和频率联系起来。").doc
b = beginTurn(doc, { input: "那 Ĥ 呢？", now: "2026-11-01T09:07:00.000Z" })
doc = finishTurn(b.doc, b.turn, "Ĥ 是哈密顿算符，对应系统的总能量：动能加势能。").doc
writeFileSync(`${root}/notebook-physics/messages.json`, `${JSON.stringify(doc, null, 2)}\n`)

doc = emptyHistory
b = beginTurn(doc, {
  input: "Users get logged out right after logging in. Find out why.",
  now: "2026-11-02T14:31:00.000Z"
})
doc = appendStep(b.doc, b.turn, {
  text: "Thought: the session check is the likely culprit.\nAction: Grep[isExpired]",
  toolCall: { callId: "call_1", name: "Grep", input: { pattern: "isExpired" } }
}).doc
let r = compressToolResult("Grep", {
  status: "success",
  data: {
    pattern: "isExpired",
    matches: [
      {
        file: "src/auth.ts",
        line: 6,
        text: "export const isExpired = (session: Session, now: number): boolean => session.expiresAt > now"
      },
      { file: "src/login.ts", line: 12, text: "if (isExpired(session, Date.now())) logout()" }
    ]
  },
  stats: { ms: 4 }
})
doc = appendToolResult(doc, b.turn, { callId: "call_1", name: "Grep", status: r.status, data: r.data }).doc
doc = appendStep(doc, b.turn, {
  text: "Thought: read the function.\nAction: Read[src/auth.ts]",
  toolCall: { callId: "call_2", name: "Read", input: { path: "src/auth.ts" } }
}).doc
r = compressToolResult("Read", {
  status: "success",
  data: {
    file: "src/auth.ts",
    content:
      "1\texport interface Session {\n2\t  readonly token: string\n3\t  readonly expiresAt: number\n4\t}\n5\t\n6\texport const isExpired = (session: Session, now: number): boolean => session.expiresAt > now",
    mtime: 1793000000000
  }
})
doc = appendToolResult(doc, b.turn, { callId: "call_2", name: "Read", status: r.status, data: r.data }).doc
doc = finishTurn(
  doc,
  b.turn,
  "Found it: isExpired compares the wrong way round. A session counts as expired while it is still valid."
).doc
writeFileSync(`${root}/code-agent-auth/messages.json`, `${JSON.stringify(doc, null, 2)}\n`)
