import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import { compile } from "@ctxo/compiler/Compile"
import * as Workspace from "@ctxo/compiler/Workspace"
import type { HistoryDocument } from "@ctxo/history/Message"
import { Effect, Layer } from "effect"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { historyText, startGateway } from "./harness.ts"

let gw: Awaited<ReturnType<typeof startGateway>>
let client: OpenAI
beforeAll(async () => {
  gw = await startGateway()
  client = new OpenAI({ apiKey: "unused", baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
})
afterAll(() => gw.close())

const history = (sid: string) => JSON.parse(historyText(gw.dataDir, sid)) as HistoryDocument
const compiledAt = (sid: string, doc: HistoryDocument, model: string) =>
  Effect.runPromise(
    compile({ sessionId: sid, model, format: "openai", query: "", history: doc }).pipe(
      Effect.provide(Layer.mergeAll(Workspace.layer(gw.dataDir), ModelRegistry.layer(), Tokenizer.layer()))
    )
  )

describe("OpenAI-compatible API, with the official openai SDK as the client", () => {
  it("lists the model registry", async () => {
    const models = await client.models.list()
    const ids = models.data.map((m) => m.id)
    expect(ids).toContain("openai/gpt-4o")
    expect(ids).toContain("anthropic/claude-sonnet-4-5")
  })

  it("adds the session's context, forwards the client's parameters, and records the turn", async () => {
    gw.upstream.script({
      type: "text",
      text: "Negate the check in login.",
      usage: { prompt_tokens: 700, completion_tokens: 9 }
    })
    const before = gw.upstream.requests.length
    const answer = await client.chat.completions.create(
      {
        model: "gpt-4o",
        messages: [{ role: "user", content: "How do I fix the login bug?" }],
        temperature: 0.2,
        max_tokens: 300
      },
      { headers: { "X-Ctxo-Session": "code-agent-auth" } }
    )
    expect(answer.choices[0]?.message.content).toBe("Negate the check in login.")
    const sent = gw.upstream.requests.slice(before)
    expect(sent).toHaveLength(1)
    expect(sent[0]!.body).toMatchObject({ model: "gpt-4o", temperature: 0.2, max_tokens: 300 })
    // Exactly the compiled context: the session's history with this input recorded.
    const doc = history("code-agent-auth")
    const at = doc.messages.findIndex((m) =>
      m.parts.some((p) => p._tag === "text" && p.text === "How do I fix the login bug?")
    )
    const expected = await compiledAt(
      "code-agent-auth",
      { ...doc, messages: doc.messages.slice(0, at + 1) },
      "gpt-4o"
    )
    expect(expected.format).toBe("openai")
    if (expected.format === "openai") expect(sent[0]!.body.messages).toEqual(expected.request.messages)
    expect(doc.messages.slice(at).map((m) => `${m.role}:${m.meta.kind}`)).toEqual([
      "user:input",
      "assistant:final"
    ])
  })

  it("takes the session from metadata.session_id too, and a retry with the same Idempotency-Key records the input once", async () => {
    const ask = () =>
      client.chat.completions.create(
        {
          model: "gpt-4o",
          messages: [{ role: "user", content: "Summarize the notebook." }],
          metadata: { session_id: "notebook-physics" }
        },
        { headers: { "Idempotency-Key": "nb-1" } }
      )
    const first = await ask()
    const calls = gw.upstream.requests.length
    const again = await ask()
    // The retry gets the recorded answer without a second model call.
    expect(again.choices[0]?.message.content).toBe(first.choices[0]?.message.content)
    expect(gw.upstream.requests.length).toBe(calls)
    const doc = history("notebook-physics")
    const turn = doc.messages.find((m) => m.meta.inputKey === "nb-1")!.meta.turn
    expect(doc.messages.filter((m) => m.meta.turn === turn && m.meta.kind === "final")).toHaveLength(1)
    expect(
      doc.messages.filter(
        (m) =>
          m.meta.kind === "input" &&
          m.parts.some((p) => p._tag === "text" && p.text === "Summarize the notebook.")
      )
    ).toHaveLength(1)
  })

  it("streams with tool calls: the client runs the tool, sends the result, and the turn goes on", async () => {
    gw.upstream.script(
      { type: "tool_calls", calls: [{ id: "call_w1", name: "get_weather", arguments: { city: "Paris" } }] },
      { type: "text", text: "It is sunny in Paris." }
    )
    const tools = [
      {
        type: "function" as const,
        function: {
          name: "get_weather",
          description: "Weather",
          parameters: { type: "object", properties: { city: { type: "string" } } }
        }
      }
    ]
    const headers = { headers: { "X-Ctxo-Session": "notebook-physics" } }
    const first = await client.chat.completions.create(
      {
        model: "gpt-4o",
        stream: true,
        tools,
        messages: [{ role: "user", content: "What is the weather in Paris?" }]
      },
      headers
    )
    const calls: Array<{ id?: string; name?: string }> = []
    for await (const chunk of first)
      for (const c of chunk.choices[0]?.delta.tool_calls ?? [])
        calls.push({ ...(c.id ? { id: c.id } : {}), ...(c.function?.name ? { name: c.function.name } : {}) })
    expect(calls).toEqual([{ id: "call_w1", name: "get_weather" }])
    const second = await client.chat.completions.create(
      {
        model: "gpt-4o",
        stream: true,
        tools,
        messages: [
          { role: "tool", tool_call_id: "call_w1", content: JSON.stringify({ sky: "sunny", c: 21 }) }
        ]
      },
      headers
    )
    let text = ""
    for await (const chunk of second) text += chunk.choices[0]?.delta.content ?? ""
    expect(text).toBe("It is sunny in Paris.")
    // The second upstream request has the call and its result adjacent, and the input once.
    const sent = gw.upstream.requests.at(-1)!.body.messages
    const at = sent.findIndex((m) => JSON.stringify(m.tool_calls ?? []).includes("call_w1"))
    expect(sent[at + 1]).toMatchObject({ role: "tool", tool_call_id: "call_w1" })
    expect(
      sent.filter((m) => m.role === "user" && m.content === "What is the weather in Paris?")
    ).toHaveLength(1)
    const doc = history("notebook-physics")
    const turn = doc.messages.find((m) =>
      m.parts.some((p) => p._tag === "text" && p.text === "What is the weather in Paris?")
    )!.meta.turn
    expect(doc.messages.filter((m) => m.meta.turn === turn).map((m) => `${m.role}:${m.meta.kind}`)).toEqual([
      "user:input",
      "assistant:step",
      "tool:step",
      "assistant:final"
    ])
  })

  it("without a session, fits the client's messages to the window, oldest whole turns first", async () => {
    const long = "word ".repeat(1_500)
    const messages: Array<OpenAI.Chat.ChatCompletionMessageParam> = [{ role: "system", content: "Be brief." }]
    for (let i = 0; i < 6; i++)
      messages.push(
        { role: "user", content: `question ${i} ${long}` },
        { role: "assistant", content: `answer ${i}` }
      )
    messages.push({ role: "user", content: "the last question" })
    const raw = await client.chat.completions.create({ model: "gpt-4", messages }).withResponse()
    expect(Number(raw.response.headers.get("x-ctxo-dropped-turns"))).toBeGreaterThan(0)
    const sent = gw.upstream.requests.at(-1)!.body.messages
    expect(sent[0]).toEqual({ role: "system", content: "Be brief." })
    expect(sent.at(-1)).toEqual({ role: "user", content: "the last question" })
    // Whole turns: every answer left is still preceded by its question.
    for (const [i, m] of sent.entries())
      if (m.role === "assistant")
        expect(String(sent[i - 1]?.content)).toContain(String(m.content).replace("answer", "question"))
  })

  it("passes an upstream context overflow on as context_length_exceeded, and refuses one it already knows", async () => {
    gw.upstream.script({
      type: "error",
      status: 400,
      code: "context_length_exceeded",
      message: "too long for the model"
    })
    const upstream = await client.chat.completions
      .create({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e)
    expect(upstream).toBeInstanceOf(OpenAI.BadRequestError)
    expect((upstream as InstanceType<typeof OpenAI.BadRequestError>).code).toBe("context_length_exceeded")
    const calls = gw.upstream.requests.length
    const known = await client.chat.completions
      .create(
        { model: "gpt-4", messages: [{ role: "user", content: "word ".repeat(20_000) }] },
        { headers: { "X-Ctxo-Session": "code-agent-auth" } }
      )
      .catch((e: unknown) => e)
    expect((known as InstanceType<typeof OpenAI.BadRequestError>).code).toBe("context_length_exceeded")
    expect(gw.upstream.requests.length).toBe(calls)
  })

  it("compiles statelessly: manifest, files, history and query in; the request and the report out", async () => {
    const response = await fetch(`${gw.baseUrl}/v1/compile`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        manifest: { policy: "notebook", systemPrompt: [{ type: "global", file: "system-prompt.md" }] },
        globalFiles: { "system-prompt.md": "You are a tutor." },
        files: { "notes.md": "# Notes\n\n## Waves\nA wave carries energy.\n" },
        query: "Explain [notes.md#Notes/Waves]",
        model: "gpt-4o",
        format: "openai"
      })
    })
    expect(response.status).toBe(200)
    const body = (await response.json()) as {
      request: { messages: Array<{ role: string; content: string }> }
      report: { available: number }
    }
    expect(body.request.messages[0]).toEqual({ role: "system", content: "You are a tutor." })
    expect(body.request.messages.at(-1)?.content).toContain("A wave carries energy.")
    expect(body.report.available).toBeGreaterThan(0)
  })

  it("compiles statelessly with a history in the seed's plain form, and names a bad message's field", async () => {
    const post = (history: unknown) =>
      fetch(`${gw.baseUrl}/v1/compile`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ history, query: "And then?", model: "gpt-4o", format: "openai" })
      })
    const plain = [
      { role: "user", content: "What is a wave?" },
      { role: "assistant", content: "A disturbance that carries energy." }
    ]
    const ok = await post(plain)
    expect(ok.status).toBe(200)
    const body = (await ok.json()) as { request: { messages: Array<{ role: string; content: string }> } }
    expect(body.request.messages.slice(-3)).toEqual([
      { role: "user", content: "What is a wave?" },
      { role: "assistant", content: "A disturbance that carries energy." },
      { role: "user", content: "And then?" }
    ])
    const bad = await post([
      { role: "user", content: "hi" },
      { role: "bot", content: "?" }
    ])
    expect(bad.status).toBe(422)
    const error = ((await bad.json()) as { error: { message: string } }).error
    expect(error.message).toMatch(/^history: \[1\]\.role: expected /)
    expect(error.message.length).toBeLessThanOrEqual(300)
  })
})
