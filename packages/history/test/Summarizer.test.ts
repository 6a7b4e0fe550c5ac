/**
 * The OpenAI summarizer, through the official openai SDK, against a local OpenAI-compatible server.
 */

import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { emptyHistory } from "../src/Message.ts"
import { FILE_SYSTEM_STATE_HEADING, makeOpenAI, SUMMARY_PROMPT } from "../src/Summarizer.ts"
import { withTurns } from "./helpers.ts"

interface Recorded {
  readonly path: string
  readonly body: { model: string; messages: Array<{ role: string; content: string }> }
}

const fakeUpstream = (reply: (body: Recorded["body"]) => { status: number; json: unknown }) =>
  Effect.acquireRelease(
    Effect.async<{ url: string; requests: Array<Recorded> }>((resume) => {
      const requests: Array<Recorded> = []
      const server = createServer((req, res) => {
        let raw = ""
        req.on("data", (chunk) => (raw += chunk))
        req.on("end", () => {
          const body = JSON.parse(raw) as Recorded["body"]
          requests.push({ path: req.url ?? "", body })
          const { status, json } = reply(body)
          res.writeHead(status, { "content-type": "application/json" })
          res.end(JSON.stringify(json))
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resume(Effect.succeed(Object.assign({ url: `http://127.0.0.1:${port}/v1`, requests }, { server })))
      })
    }),
    (upstream) =>
      Effect.sync(() => (upstream as unknown as { server: import("node:http").Server }).server.close())
  )

const completion = (content: string) => ({
  id: "chatcmpl-1",
  object: "chat.completion",
  created: 0,
  model: "m",
  choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
  usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 }
})

const modelText = `## 📌 Archived Session Summary
*(Contains context from turn 1 to turn 3)*

### 🎯 Objectives & Status
* **Original Goal**: build the thing

${FILE_SYSTEM_STATE_HEADING}
* \`invented.ts\`: the model made this up`

describe("OpenAI summarizer", () => {
  it.scoped("sends the prompt and transcript, and fills File System State from the tool calls", () =>
    Effect.gen(function* () {
      const upstream = yield* fakeUpstream(() => ({ status: 200, json: completion(modelText) }))
      const summarizer = makeOpenAI({ baseURL: upstream.url, apiKey: "test-key", maxRetries: 0 })
      const messages = withTurns(emptyHistory, 3).messages
      const text = yield* summarizer.summarize({ messages, fromTurn: 1, toTurn: 3, model: "gpt-4o-mini" })
      expect(upstream.requests).toHaveLength(1)
      const request = upstream.requests[0]!
      expect(request.path).toBe("/v1/chat/completions")
      expect(request.body.model).toBe("gpt-4o-mini")
      expect(request.body.messages[0]).toEqual({ role: "system", content: SUMMARY_PROMPT })
      expect(request.body.messages[1]!.content).toContain("[user] question 0:")
      expect(request.body.messages[1]!.content).toContain('Action: Write[{"path":"src/f0.ts","content":"x"}]')
      expect(text).toContain("* **Original Goal**: build the thing")
      expect(text).not.toContain("invented.ts")
      expect(text).toContain("* `src/f0.ts`: written.\n* `src/f1.ts`: written.\n* `src/f2.ts`: written.")
    })
  )

  it.scoped("turns an upstream error into a SummarizerError", () =>
    Effect.gen(function* () {
      const upstream = yield* fakeUpstream(() => ({
        status: 500,
        json: { error: { message: "overloaded" } }
      }))
      const summarizer = makeOpenAI({ baseURL: upstream.url, apiKey: "k", model: "m", maxRetries: 0 })
      const error = yield* Effect.flip(summarizer.summarize({ messages: [], fromTurn: 1, toTurn: 1 }))
      expect(error._tag).toBe("SummarizerError")
      expect(error.message).toMatch(/^Summary generation failed: 500/)
    })
  )
})
