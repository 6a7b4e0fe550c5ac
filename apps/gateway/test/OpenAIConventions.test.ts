/**
 * The gateway behaves as OpenAI clients expect it to, checked with the official openai SDK (6.x):
 * upstream errors with their status (before a stream's first byte too), type, code, message and
 * rate-limit headers, so the SDK's retry honours `Retry-After`; errors after a stream's first byte
 * as a frame the SDK raises; OpenAI-shaped 401, 403, 404 and 413; `models.retrieve`; what session
 * mode takes of a request and says it ignored, with `x-ctxo-*` headers; a request that records
 * nothing; provider-qualified model ids forwarded without their prefix and routed by it; the local
 * model's scripted tool calls; the plural session routes and the seed's singular aliases.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type FakeUpstream, parseScript, startFakeUpstream } from "@ctxo/agent/FakeUpstream"
import * as ModelClient from "@ctxo/agent/ModelClient"
import * as V8Tuning from "@ctxo/agent/V8Tuning"
import { ConfigProvider, Effect, Layer, Option, Redacted, Stream } from "effect"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as GatewayConfig from "../src/GatewayConfig.ts"
import { chatEvents, createSession, historyText, startGateway } from "./harness.ts"

type Gateway = Awaited<ReturnType<typeof startGateway>>

// A small custom model, so a context-length refusal needs no megabyte of input.
process.env.CTXO_MODELS = JSON.stringify({
  models: { "acme/tiny": { contextWindow: 3000, tokenizer: { kind: "exact", encoding: "o200k_base" } } }
})

const failure = async (run: () => Promise<unknown>) => {
  try {
    await run()
  } catch (e) {
    return e as InstanceType<typeof OpenAI.APIError>
  }
  throw new Error("the call succeeded")
}

const drain = async (stream: AsyncIterable<OpenAI.Chat.Completions.ChatCompletionChunk>) => {
  let text = ""
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ""
  return text
}

const user = (content: string, model = "gpt-4o") => ({
  model,
  messages: [{ role: "user" as const, content }]
})

const historyOf = (gw: Gateway, sid: string) => historyText(gw.dataDir, sid)

let sessions = 0
const newSession = (gw: Gateway) => createSession(gw, `conventions-${++sessions}`)

const rateLimited = {
  type: "error",
  status: 429,
  message: "Rate limit reached",
  retryAfter: "1",
  headers: { "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s" }
} as const

describe("upstream errors as OpenAI clients read them", () => {
  let gw: Gateway
  let client: OpenAI
  beforeAll(async () => {
    gw = await startGateway({ upstreamTimeoutMs: 3_000, upstreamFirstByteMs: 1_000, upstreamIdleMs: 500 })
    client = new OpenAI({ apiKey: "unused", baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
  })
  afterAll(() => gw.close())

  it.each([
    ["proxy", false],
    ["proxy", true],
    ["session", false],
    ["session", true]
  ] as const)(
    "%s (streaming %s): a 429 keeps its status, message, type, code and rate-limit headers",
    async (mode, stream) => {
      const headers = mode === "session" ? { "X-Ctxo-Session": await newSession(gw) } : {}
      gw.upstream.script(rateLimited)
      const error = await failure(async () =>
        stream
          ? drain(await client.chat.completions.create({ ...user("hi"), stream: true }, { headers }))
          : client.chat.completions.create(user("hi"), { headers })
      )
      // Before the first byte: an HTTP status (never a 200 with an error inside).
      expect(error).toBeInstanceOf(OpenAI.RateLimitError)
      expect(error.status).toBe(429)
      expect(error.message).toBe("429 Rate limit reached")
      expect(error.type).toBe("tokens")
      expect(error.code).toBe("rate_limit_exceeded")
      expect(error.headers?.get("retry-after")).toBe("1")
      expect(error.headers?.get("x-ratelimit-remaining-requests")).toBe("0")
      expect(error.headers?.get("x-ratelimit-reset-requests")).toBe("1s")
    }
  )

  it("passes the upstream's own type, code and param on (a 400), not `upstream_error`", async () => {
    gw.upstream.script({
      type: "error",
      status: 400,
      message: "Invalid value for 'temperature'",
      errorType: "invalid_request_error",
      code: "invalid_value",
      param: "temperature"
    })
    const error = await failure(() => client.chat.completions.create({ ...user("hi"), temperature: 9 }))
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect(error.message).toBe("400 Invalid value for 'temperature'")
    expect(error).toMatchObject({
      type: "invalid_request_error",
      code: "invalid_value",
      param: "temperature"
    })
  })

  it.each([false, true])(
    "the SDK's retry honours a 429's Retry-After (session mode %s)",
    async (session) => {
      const retrying = new OpenAI({ apiKey: "unused", baseURL: `${gw.baseUrl}/v1`, maxRetries: 1 })
      const sid = session ? await newSession(gw) : undefined
      for (const stream of [false, true]) {
        const headers =
          sid === undefined ? {} : { "X-Ctxo-Session": sid, "Idempotency-Key": `retry-${sid}-${stream}` }
        gw.upstream.script(rateLimited, { type: "text", text: `Answered after waiting (${stream}).` })
        const before = gw.upstream.requests.length
        const started = Date.now()
        const text = stream
          ? await drain(
              await retrying.chat.completions.create(
                { ...user(`retry ${stream}`), stream: true },
                { headers }
              )
            )
          : ((await retrying.chat.completions.create(user(`retry ${stream}`), { headers })).choices[0]
              ?.message.content ?? "")
        expect(text).toBe(`Answered after waiting (${stream}).`)
        expect(Date.now() - started).toBeGreaterThanOrEqual(900)
        expect(gw.upstream.requests.length - before).toBe(2)
      }
      // Session mode: the input was recorded once, with the answer after the retry.
      if (sid !== undefined) {
        const doc = JSON.parse(historyOf(gw, sid)) as { messages: Array<{ meta: { kind: string } }> }
        expect(doc.messages.map((m) => m.meta.kind)).toEqual(["input", "final", "input", "final"])
      }
    },
    20_000
  )

  it.each(["proxy", "session"] as const)(
    "%s: a failure after the first byte ends the stream with an error frame the SDK raises",
    async (mode) => {
      const headers = mode === "session" ? { "X-Ctxo-Session": await newSession(gw) } : {}
      gw.upstream.script({ type: "stall", after: "chunk" })
      let received = ""
      const error = await failure(async () => {
        for await (const chunk of await client.chat.completions.create(
          { ...user("stall"), stream: true },
          { headers }
        ))
          received += chunk.choices[0]?.delta?.content ?? ""
      })
      expect(received).toBe("Half an ans")
      expect(error).toBeInstanceOf(OpenAI.APIError)
      expect(error.status).toBeUndefined()
      expect(error.message).toMatch(/no data from the upstream for 500 ms/)
      expect(error.type).toBe("upstream_error")
    },
    10_000
  )
})

describe("errors of the gateway itself on /v1, as OpenAI shapes them", () => {
  const key = "tenant-key-0123456789abcdef"
  const admin = "admin-key-0123456789abcdef"
  let gw: Gateway
  beforeAll(async () => {
    gw = await startGateway({
      apiKeys: [{ key, tenant: "acme" }],
      adminKey: Option.some(Redacted.make(admin)),
      maxBodyBytes: 64 * 1024
    })
  })
  afterAll(() => gw.close())
  const sdk = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })

  it("401, 403, 404 and 413 carry type and code", async () => {
    const unauthorized = await failure(() => sdk("not-a-key").models.list())
    expect(unauthorized).toBeInstanceOf(OpenAI.AuthenticationError)
    expect(unauthorized).toMatchObject({ type: "invalid_request_error", code: "invalid_api_key" })
    const forbidden = await failure(() => sdk(admin).chat.completions.create(user("hi")))
    expect(forbidden).toBeInstanceOf(OpenAI.PermissionDeniedError)
    expect(forbidden).toMatchObject({ type: "invalid_request_error", code: "insufficient_permissions" })
    const notFound = await failure(() => sdk(key).get("/no/such/route"))
    expect(notFound).toBeInstanceOf(OpenAI.NotFoundError)
    expect(notFound).toMatchObject({ type: "invalid_request_error", code: "unknown_url" })
    const tooLarge = await failure(() => sdk(key).chat.completions.create(user("x".repeat(100 * 1024))))
    expect(tooLarge.status).toBe(413)
    expect(tooLarge).toMatchObject({ type: "invalid_request_error", code: "payload_too_large" })
  })

  it("retrieves a model by its qualified id, bare name or alias; an unknown one is model_not_found", async () => {
    const client = sdk(key)
    expect(await client.models.retrieve("openai/gpt-4o")).toMatchObject({
      id: "openai/gpt-4o",
      object: "model"
    })
    expect(await client.models.retrieve("gpt-4o")).toMatchObject({ id: "openai/gpt-4o" })
    expect(await client.models.retrieve("claude-sonnet-4-5")).toMatchObject({
      id: "anthropic/claude-sonnet-4-5",
      owned_by: "anthropic"
    })
    // A slash left raw in the path (curl) reaches the model too.
    const raw = await fetch(`${gw.baseUrl}/v1/models/openai/gpt-4o`, {
      headers: { authorization: `Bearer ${key}` }
    })
    expect(raw.status).toBe(200)
    expect(((await raw.json()) as { id: string }).id).toBe("openai/gpt-4o")
    const unknown = await failure(() => client.models.retrieve("acme/no-such-model"))
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError)
    expect(unknown).toMatchObject({ code: "model_not_found", type: "invalid_request_error" })
    const chat = await failure(() => client.chat.completions.create(user("hi", "no-such-model-xyz")))
    expect(chat).toBeInstanceOf(OpenAI.NotFoundError)
    expect(chat).toMatchObject({ code: "model_not_found", param: "model" })
  })
})

describe("session mode says what it takes", () => {
  let gw: Gateway
  let client: OpenAI
  beforeAll(async () => {
    gw = await startGateway()
    client = new OpenAI({ apiKey: "unused", baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
  })
  afterAll(() => gw.close())

  it("sends x-ctxo-* headers, and says which messages and parts it ignored (streaming or not)", async () => {
    const sid = await newSession(gw)
    const whole = [
      { role: "system" as const, content: "You are terse." },
      { role: "user" as const, content: "First question" },
      { role: "assistant" as const, content: "First answer" },
      {
        role: "user" as const,
        content: [
          { type: "text" as const, text: "What is in this picture?" },
          { type: "image_url" as const, image_url: { url: "data:image/png;base64,AAAA" } }
        ]
      }
    ]
    const { data, response } = await client.chat.completions
      .create({ model: "gpt-4o", messages: whole }, { headers: { "X-Ctxo-Session": sid } })
      .withResponse()
    expect(data.choices[0]?.message.content).toMatch(/What is in this picture\?/)
    const h = response.headers
    expect(h.get("x-ctxo-ignored-messages")).toBe("3")
    expect(h.get("x-ctxo-reduced-parts")).toBe("1")
    expect(h.get("x-ctxo-turn")).toBe("1")
    expect(Number(h.get("x-ctxo-tokens-used"))).toBeGreaterThan(0)
    expect(Number(h.get("x-ctxo-tokens-available"))).toBeGreaterThan(Number(h.get("x-ctxo-tokens-used")))
    expect(h.get("x-ctxo-cut-turns")).toBe("0")
    expect(h.get("x-ctxo-prefix-hash")).toMatch(/^[0-9a-f]{8,}$/)

    const streamed = await client.chat.completions
      .create(
        { model: "gpt-4o", stream: true, messages: user("Second question").messages },
        { headers: { "X-Ctxo-Session": sid } }
      )
      .withResponse()
    expect(await drain(streamed.data)).toMatch(/Second question/)
    expect(streamed.response.headers.get("x-ctxo-turn")).toBe("2")
    expect(streamed.response.headers.get("x-ctxo-ignored-messages")).toBeNull()
    expect(streamed.response.headers.get("x-ctxo-prefix-hash")).toBe(h.get("x-ctxo-prefix-hash"))
  })

  it("refuses an input that cannot fit as context_length_exceeded, with the budget report", async () => {
    const sid = await newSession(gw)
    const error = await failure(() =>
      client.chat.completions.create(user("word ".repeat(4000), "acme/tiny"), {
        headers: { "X-Ctxo-Session": sid }
      })
    )
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect(error).toMatchObject({ code: "context_length_exceeded", param: "messages" })
    const report = (error.error as { report?: { model: string; available: number } }).report
    expect(report).toMatchObject({ model: "acme/tiny", available: expect.any(Number) })
  })

  it("x-ctxo-record: false compiles and forwards, and records nothing", async () => {
    const sid = await newSession(gw)
    await client.chat.completions.create(user("recorded"), { headers: { "X-Ctxo-Session": sid } })
    const recorded = historyOf(gw, sid)
    for (const stream of [false, true]) {
      const before = gw.upstream.requests.length
      const headers = { "X-Ctxo-Session": sid, "x-ctxo-record": "false" }
      const { response } = stream
        ? await client.chat.completions
            .create({ ...user("an eval question"), stream: true }, { headers })
            .withResponse()
        : await client.chat.completions.create(user("an eval question"), { headers }).withResponse()
      expect(response.headers.get("x-ctxo-recorded")).toBe("false")
      expect(response.headers.get("x-ctxo-prefix-hash")).toMatch(/./)
      const sent = gw.upstream.requests[before]!.body.messages
      // The session's context (its earlier turn) and the new question.
      expect(JSON.stringify(sent)).toContain("recorded")
      expect(JSON.stringify(sent.at(-1))).toContain("an eval question")
    }
    expect(historyOf(gw, sid)).toBe(recorded)
  })
})

describe("model ids and upstreams", () => {
  let gw: Gateway
  let second: FakeUpstream
  let client: OpenAI
  beforeAll(async () => {
    second = await startFakeUpstream()
    gw = await startGateway({
      upstreams: [
        { name: "anthropic", baseUrl: second.url, apiKey: Option.some(Redacted.make("anthropic-key")) }
      ]
    })
    client = new OpenAI({ apiKey: "unused", baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
  })
  afterAll(async () => {
    await gw.close()
    await second.close()
  })

  it("forwards a provider-qualified id without its prefix, to the upstream of that provider", async () => {
    await client.chat.completions.create(user("hi", "openai/gpt-4o"))
    expect(gw.upstream.requests.at(-1)?.body.model).toBe("gpt-4o")
    await client.chat.completions.create(user("hi", "anthropic/claude-sonnet-4-5"))
    expect(second.requests.at(-1)?.body.model).toBe("claude-sonnet-4-5")
    expect(second.requests.at(-1)?.headers.authorization).toBe("Bearer anthropic-key")
    // Streaming and in session mode alike.
    await drain(
      await client.chat.completions.create({ ...user("hi", "anthropic/claude-sonnet-4-5"), stream: true })
    )
    expect(second.requests).toHaveLength(2)
    await client.chat.completions.create(user("hi", "openai/gpt-4o"), {
      headers: { "X-Ctxo-Session": "code-agent-auth" }
    })
    expect(gw.upstream.requests.at(-1)?.body.model).toBe("gpt-4o")
  })

  it("routes names the same way in the model client", () => {
    const named = [{ name: "anthropic" }, { name: "router", keepPrefix: true }]
    const fallback = { name: "default" }
    expect(ModelClient.routeModel("openai/gpt-4o", named, fallback)).toEqual({
      target: fallback,
      model: "gpt-4o"
    })
    expect(ModelClient.routeModel("gpt-4o", named, fallback)).toEqual({ target: fallback, model: "gpt-4o" })
    expect(ModelClient.routeModel("Anthropic/claude-x", named, fallback)).toEqual({
      target: named[0],
      model: "claude-x"
    })
    expect(ModelClient.routeModel("router/openai/gpt-4o", named, fallback)).toEqual({
      target: named[1],
      model: "router/openai/gpt-4o"
    })
    // Not a registry provider: the id is the upstream's own (vLLM, OpenRouter).
    expect(ModelClient.routeModel("meta-llama/llama-3.3-70b", named, fallback)).toEqual({
      target: fallback,
      model: "meta-llama/llama-3.3-70b"
    })
  })
})

describe("configuration", () => {
  const load = (env: Record<string, string>) =>
    Effect.runPromise(
      Effect.either(
        Effect.flatMap(Layer.build(GatewayConfig.layer), (ctx) => Effect.succeed(ctx.unsafeMap.size)).pipe(
          Effect.scoped,
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))
        )
      )
    )
  const settingsOf = (env: Record<string, string>) =>
    Effect.runPromise(
      Effect.scoped(Layer.build(GatewayConfig.layer)).pipe(
        Effect.map((ctx) => ctx.unsafeMap.get(GatewayConfig.GatewayConfig.key) as GatewayConfig.Settings),
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))
      )
    )

  it("a custom model without a tokenizer is one sentence naming the field, not a stack trace", async () => {
    const result = await load({
      CTXO_MODELS: JSON.stringify({ models: { "acme/x": { contextWindow: 8000 } } })
    })
    expect(result._tag).toBe("Left")
    const text = String(result._tag === "Left" ? result.left : "")
    expect(text).toMatch(/CTXO_MODELS.*models\["acme\/x"\]: a new model needs tokenizer/)
    expect(text).toContain('"kind": "estimate"')
    expect(text).not.toMatch(/at .*\.ts:\d+/)
  })

  it("reads CTXO_UPSTREAMS (keys from the variables it names) and the local model's port and script", async () => {
    process.env.CONVENTIONS_ANTHROPIC_KEY = "sk-ant-test"
    const dir = mkdtempSync(join(tmpdir(), "ctxo-script-"))
    try {
      const script = join(dir, "script.json")
      writeFileSync(script, JSON.stringify([{ type: "text", text: "Scripted." }]))
      const settings = await settingsOf({
        CTXO_UPSTREAMS: JSON.stringify({
          anthropic: { baseUrl: "https://api.anthropic.com/v1/", apiKeyEnv: "CONVENTIONS_ANTHROPIC_KEY" },
          openrouter: { baseUrl: "https://openrouter.ai/api/v1", keepPrefix: true }
        }),
        CTXO_LOCAL_MODEL_PORT: "18999",
        CTXO_LOCAL_MODEL_SCRIPT: script
      })
      expect(
        settings.upstreams?.map((u) => [u.name, u.baseUrl, Option.map(u.apiKey, Redacted.value)])
      ).toEqual([
        ["anthropic", "https://api.anthropic.com/v1/", Option.some("sk-ant-test")],
        ["openrouter", "https://openrouter.ai/api/v1", Option.none()]
      ])
      expect(settings.localModelPort).toBe(18999)
      expect(settings.localModelScript).toEqual([{ type: "text", text: "Scripted." }])
      const bad = await load({ CTXO_UPSTREAMS: JSON.stringify({ x: { baseUrl: "ftp://x" } }) })
      expect(String(bad._tag === "Left" ? bad.left : "")).toMatch(/CTXO_UPSTREAMS.*x\.baseUrl/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("reads CTXO_BUDGET_SHARES and the memory settings, and names a bad share", async () => {
    const settings = await settingsOf({
      CTXO_BUDGET_SHARES: JSON.stringify({ knowledge: 0.2, tools: 0 }),
      CTXO_MEMORY_L2_MS: "3600000",
      CTXO_MEMORY_PERSIST_MS: "0"
    })
    expect(settings.budgetShares).toEqual({ knowledge: 0.2, tools: 0 })
    expect(settings.memory?.ttl.L2).toBe(3_600_000)
    expect(settings.memory?.persistMs).toBe(0)
    const bad = await load({ CTXO_BUDGET_SHARES: JSON.stringify({ knowledge: 2 }) })
    expect(String(bad._tag === "Left" ? bad.left : "")).toMatch(
      /CTXO_BUDGET_SHARES.*knowledge: 2 is not a share from 0 to 1/
    )
    const notObject = await load({ CTXO_BUDGET_SHARES: "[0.2]" })
    expect(String(notObject._tag === "Left" ? notObject.left : "")).toMatch(/CTXO_BUDGET_SHARES.*expected \{/)
  })

  it("reads what the session cache may hold (CTXO_SESSION_CACHE_MB), and names a value out of range", async () => {
    expect((await settingsOf({})).sessionCacheBytes).toBe(16 * 1024 * 1024)
    expect((await settingsOf({ CTXO_SESSION_CACHE_MB: "256" })).sessionCacheBytes).toBe(256 * 1024 * 1024)
    const bad = await load({ CTXO_SESSION_CACHE_MB: "0" })
    expect(String(bad._tag === "Left" ? bad.left : "")).toMatch(
      /CTXO_SESSION_CACHE_MB.*at least 1 \(megabytes\)/
    )
  })

  it("reads how far the heap may grow (CTXO_HEAP_GROWING_PERCENT), and names a value out of range", async () => {
    expect((await settingsOf({})).heapGrowingPercent).toBe(GatewayConfig.DEFAULT_HEAP_GROWING_PERCENT)
    expect((await settingsOf({ CTXO_HEAP_GROWING_PERCENT: "0" })).heapGrowingPercent).toBe(0)
    expect((await settingsOf({ CTXO_HEAP_GROWING_PERCENT: "100" })).heapGrowingPercent).toBe(100)
    const bad = await load({ CTXO_HEAP_GROWING_PERCENT: "5" })
    expect(String(bad._tag === "Left" ? bad.left : "")).toMatch(
      /CTXO_HEAP_GROWING_PERCENT.*0 \(V8's own\) or a percent from 10 to 300/
    )
  })

  it("turns V8's allocation-site pretenuring off unless CTXO_ALLOCATION_SITE_PRETENURING keeps it, and names a value that is no boolean", async () => {
    const flags = async (env: Record<string, string>) => V8Tuning.flagsOf(await settingsOf(env))
    expect(await flags({})).toEqual(["--heap-growing-percent=50", "--no-allocation-site-pretenuring"])
    expect(await flags({ CTXO_ALLOCATION_SITE_PRETENURING: "true", CTXO_HEAP_GROWING_PERCENT: "0" })).toEqual(
      []
    )
    expect(await flags({ CTXO_ALLOCATION_SITE_PRETENURING: "false" })).toContain(
      "--no-allocation-site-pretenuring"
    )
    const bad = await load({ CTXO_ALLOCATION_SITE_PRETENURING: "sometimes" })
    expect(String(bad._tag === "Left" ? bad.left : "")).toMatch(/CTXO_ALLOCATION_SITE_PRETENURING/)
  })
})

describe("the local model", () => {
  const readFile = {
    type: "function" as const,
    function: { name: "read_file", parameters: { type: "object", properties: { path: { type: "string" } } } }
  }

  it("calls the tool a prompt names, then answers once the result is in (through the gateway, streaming or not)", async () => {
    const gw = await startGateway()
    try {
      const client = new OpenAI({ apiKey: "unused", baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
      const ask = { role: "user" as const, content: 'call read_file {"path":"notes.md"}' }
      const first = await client.chat.completions.create({
        model: "gpt-4o",
        tools: [readFile],
        messages: [ask]
      })
      const call = first.choices[0]?.message.tool_calls?.[0]
      expect(first.choices[0]?.finish_reason).toBe("tool_calls")
      expect(call).toMatchObject({ type: "function", function: { name: "read_file" } })
      expect(JSON.parse(call!.type === "function" ? call!.function.arguments : "")).toEqual({
        path: "notes.md"
      })
      const streamed = await client.chat.completions.create({
        model: "gpt-4o",
        tools: [readFile],
        messages: [ask],
        stream: true
      })
      const names: Array<string> = []
      for await (const chunk of streamed)
        for (const c of chunk.choices[0]?.delta?.tool_calls ?? [])
          if (c.function?.name) names.push(c.function.name)
      expect(names).toEqual(["read_file"])
      const second = await client.chat.completions.create({
        model: "gpt-4o",
        tools: [readFile],
        messages: [
          ask,
          { role: "assistant", content: null, tool_calls: first.choices[0]!.message.tool_calls! },
          { role: "tool", tool_call_id: call!.id, content: "# Notes\nline one" }
        ]
      })
      expect(second.choices[0]?.message.content).toMatch(/The tool answered: # Notes line one/)
      // A tool the request does not offer is not called.
      const plain = await client.chat.completions.create({ model: "gpt-4o", messages: [ask] })
      expect(plain.choices[0]?.message.tool_calls).toBeUndefined()
    } finally {
      await gw.close()
    }
  })

  it("drives the agent's own tools in the SSE chat the same way (function calling offline)", async () => {
    const gw = await startGateway()
    try {
      const chat = await gw.run(
        chatEvents("code-agent-auth", { message: 'call read_file {"path":"CODE_LAW.md"}' })
      )
      const events = chat.events.map((e) => e.event)
      expect(events).toContain("tool-call")
      expect(events).toContain("tool-result")
      expect(chat.events.at(-1)?.data).toMatchObject({
        type: "done",
        text: expect.stringMatching(/The tool answered: .*Code law/)
      })
    } finally {
      await gw.close()
    }
  })

  it("answers a script file's replies first, on the pinned port", async () => {
    const replies = parseScript(
      JSON.stringify({
        replies: [{ type: "tool_calls", calls: [{ id: "call_9", name: "search", arguments: { q: "auth" } }] }]
      }),
      "script.json"
    )
    expect(() => parseScript('[{"type":"nope"}]', "bad.json")).toThrow(
      /bad.json: replies\[0\].type must be one of/
    )
    const probe = await startFakeUpstream()
    const port = Number(new URL(probe.url).port)
    await probe.close()
    const events = await Effect.runPromise(
      Effect.gen(function* () {
        const client = yield* ModelClient.ModelClient
        const first = yield* Stream.runCollect(
          client.complete({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }] })
        )
        const second = yield* Stream.runCollect(
          client.complete({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }] })
        )
        return { upstream: client.upstream, first: [...first].at(-1), second: [...second].at(-1) }
      }).pipe(
        Effect.provide(
          ModelClient.layer({
            apiKey: Option.none(),
            baseUrl: Option.none(),
            localModel: { port, script: replies },
            timeoutMs: 5_000
          })
        )
      )
    )
    expect(events.upstream).toContain(`:${port}/`)
    expect(events.first).toMatchObject({
      _tag: "Done",
      toolCalls: [{ id: "call_9", name: "search", arguments: '{"q":"auth"}' }]
    })
    expect(events.second).toMatchObject({
      _tag: "Done",
      toolCalls: [],
      text: expect.stringMatching(/local model/)
    })
  })
})

describe("session routes", () => {
  let gw: Gateway
  beforeAll(async () => {
    gw = await startGateway()
  })
  afterAll(() => gw.close())

  it("answer on the plural paths, and on the seed's singular ones as aliases", async () => {
    for (const base of ["/api/sessions", "/api/session"]) {
      const preview = await fetch(`${gw.baseUrl}${base}/code-agent-auth/context-preview?model=gpt-4o`)
      expect(preview.status, base).toBe(200)
      expect(((await preview.json()) as { model: string }).model).toBe("openai/gpt-4o")
      const chat = await fetch(`${gw.baseUrl}${base}/code-agent-auth/chat`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ message: `hello through ${base}` })
      })
      expect(chat.status, base).toBe(200)
      expect(chat.headers.get("content-type")).toMatch(/text\/event-stream/)
      expect(await chat.text()).toMatch(/event: done/)
    }
  })
})
