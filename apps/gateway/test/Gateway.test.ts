import { readFileSync } from "node:fs"
import { join } from "node:path"
import { Api } from "@ctxo/api/Api"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import { compile } from "@ctxo/compiler/Compile"
import * as Workspace from "@ctxo/compiler/Workspace"
import type { HistoryDocument } from "@ctxo/history/Message"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { chatEvents, historyText, startGateway } from "./harness.ts"

let gw: Awaited<ReturnType<typeof startGateway>>
beforeAll(async () => {
  gw = await startGateway()
})
afterAll(() => gw.close())

const api = HttpApiClient.make(Api)
const raw = (request: HttpClientRequest.HttpClientRequest) =>
  Effect.gen(function* () {
    const client = yield* HttpClient.HttpClient
    const response = yield* client.execute(request)
    return { status: response.status, headers: response.headers, body: yield* response.json }
  }).pipe(Effect.scoped)

describe("sessions and files", () => {
  it("creates, lists, reads and deletes sessions; unknown ones are 404 with the error shape", async () => {
    const result = await gw.run(
      Effect.gen(function* () {
        const client = yield* api
        const created = yield* client.sessions.create({ payload: { id: "s1", concept: "Refunds" } })
        const listed = yield* client.sessions.list()
        const got = yield* client.sessions.get({ path: { id: "s1" } })
        yield* client.sessions.delete({ path: { id: "s1" } })
        const gone = yield* Effect.flip(client.sessions.get({ path: { id: "s1" } }))
        const duplicate = yield* Effect.flip(
          client.sessions.create({ payload: { id: "notebook-physics", concept: "x" } })
        )
        return { created, listed, got, gone, duplicate }
      })
    )
    expect(result.got).toEqual(result.created)
    expect(result.listed.map((s) => s.id)).toEqual(["notebook-physics", "code-agent-auth", "s1"])
    expect(result.gone).toMatchObject({ _tag: "NotFound", tag: "SessionNotFound", message: "No session s1" })
    expect(result.duplicate).toMatchObject({ _tag: "Conflict", tag: "SessionExists" })
    const wire = await gw.run(raw(HttpClientRequest.get("/api/sessions/nope")))
    expect(wire.status).toBe(404)
    expect(wire.body).toEqual({
      error: { tag: "SessionNotFound", message: "No session nope", details: { sessionId: "nope" } }
    })
    expect(wire.headers["x-request-id"]).toMatch(/^req-/)
  })

  it("writes with If-Match, answers 409 to a stale version, reads line ranges, refuses paths out of the session", async () => {
    const out = await gw.run(
      Effect.gen(function* () {
        const client = yield* api
        const path = { id: "code-agent-auth" }
        const first = yield* client.files.write({
          path,
          urlParams: { path: "notes/plan.md" },
          headers: {},
          payload: { content: "a\nb\nc\n" }
        })
        const second = yield* client.files.write({
          path,
          urlParams: { path: "notes/plan.md" },
          headers: { "if-match": `"${first.version}"` },
          payload: { content: "B", startLine: 2, endLine: 2 }
        })
        const stale = yield* Effect.flip(
          client.files.write({
            path,
            urlParams: { path: "notes/plan.md" },
            headers: { "if-match": first.version },
            payload: { content: "x" }
          })
        )
        const range = yield* client.files.read({
          path,
          urlParams: { path: "notes/plan.md", startLine: 2, endLine: 3 }
        })
        const outside = yield* Effect.flip(client.files.read({ path, urlParams: { path: "../profile.md" } }))
        const history = yield* Effect.flip(
          client.files.write({
            path,
            urlParams: { path: "messages.json" },
            headers: {},
            payload: { content: "[]" }
          })
        )
        const files = yield* client.files.list({ path })
        return { second, stale, range, outside, history, files }
      })
    )
    expect(out.stale).toMatchObject({ _tag: "Conflict", tag: "VersionConflict" })
    expect(out.range).toMatchObject({
      content: "B\nc",
      startLine: 2,
      endLine: 3,
      totalLines: 3,
      version: out.second.version
    })
    expect(out.outside).toMatchObject({ _tag: "BadRequest", tag: "PathRefused" })
    expect(out.history).toMatchObject({ _tag: "BadRequest", tag: "PathRefused" })
    expect(out.files.map((f) => f.path)).toContain("notes/plan.md")
    expect(readFileSync(join(gw.dataDir, "code-agent-auth", "notes/plan.md"), "utf8")).toBe("a\nB\nc\n")
  })

  it("answers bad input with 400, 413 and 404 in the same error shape, never a stack trace", async () => {
    const post = (body: string) =>
      raw(HttpClientRequest.post("/api/sessions").pipe(HttpClientRequest.bodyText(body, "application/json")))
    const unknownField = await gw.run(post(JSON.stringify({ concept: "x", extra: 1 })))
    expect(unknownField.status).toBe(400)
    expect(unknownField.body).toMatchObject({ error: { tag: "InvalidRequest" } })
    expect(JSON.stringify(unknownField.body)).toContain("extra")
    const notJson = await gw.run(post("{nope"))
    expect(notJson).toMatchObject({ status: 400, body: { error: { tag: "InvalidRequest" } } })
    const big = await gw.run(post(JSON.stringify({ concept: "x".repeat(1_100_000) })))
    expect(big).toMatchObject({ status: 413, body: { error: { tag: "PayloadTooLarge" } } })
    const route = await gw.run(raw(HttpClientRequest.get("/api/nothing")))
    expect(route).toMatchObject({ status: 404, body: { error: { tag: "RouteNotFound" } } })
    for (const r of [unknownField, notJson, big, route])
      expect(JSON.stringify(r.body)).not.toMatch(/at .*\.ts:\d+/)
  })
})

describe("blocks, config and preview", () => {
  it("serves the profile's block tree and a session file's", async () => {
    const out = await gw.run(
      Effect.gen(function* () {
        const client = yield* api
        return {
          profile: yield* client.blocks.profile(),
          file: yield* client.blocks.file({
            path: { id: "notebook-physics" },
            urlParams: { path: "guidance.md" }
          })
        }
      })
    )
    expect(out.profile.map((b) => b.id)).toContain("基本信息")
    expect(out.profile.find((b) => b.id === "基本信息")?.children.map((c) => c.id)).toContain(
      "基本信息/教育背景"
    )
    expect(out.file.length).toBeGreaterThan(0)
  })

  it("validates context-config.json on write and names the field", async () => {
    const out = await gw.run(
      Effect.gen(function* () {
        const client = yield* api
        const path = { id: "notebook-physics" }
        const before = yield* client.context.getConfig({ path })
        const bad = yield* Effect.flip(
          client.context.putConfig({ path, headers: {}, payload: { policy: "fancy" } })
        )
        const ok = yield* client.context.putConfig({
          path,
          headers: {},
          payload: { ...(before as object), query: "What is a wave function?" }
        })
        const after = yield* client.context.getConfig({ path })
        return { bad, ok, after }
      })
    )
    expect(out.bad).toMatchObject({ _tag: "Unprocessable", tag: "InvalidManifest" })
    expect(out.bad.message).toContain("policy")
    expect(out.after).toMatchObject({ query: "What is a wave function?" })
  })

  it("previews the compiled request and its budget report without calling a model", async () => {
    const calls = gw.upstream.requests.length
    const preview = await gw.run(
      Effect.flatMap(api, (client) =>
        client.context.preview({
          path: { id: "code-agent-auth" },
          urlParams: { model: "gpt-4o", format: "openai" }
        })
      )
    )
    expect(preview.model).toBe("openai/gpt-4o")
    // The preview is typed by its format: narrowed, its request needs no cast.
    expect(preview.format).toBe("openai")
    if (preview.format === "openai") expect(preview.request.messages[0]?.role).toBe("system")
    expect(preview.layers.map((l) => l.id)).toContain("system_prompt")
    expect(gw.upstream.requests.length).toBe(calls)
  })
})

describe("OpenAPI and docs", () => {
  it("publishes /openapi.json and an interactive page at /docs", async () => {
    const spec = await gw.run(raw(HttpClientRequest.get("/openapi.json")))
    expect(Object.keys((spec.body as { paths: object }).paths)).toEqual(
      expect.arrayContaining([
        "/api/sessions",
        "/api/profile/blocks",
        "/api/session/{id}/context-preview",
        "/api/session/{id}/chat"
      ])
    )
    const docs = await gw.run(
      Effect.gen(function* () {
        const client = yield* HttpClient.HttpClient
        const response = yield* client.get("/docs")
        return { status: response.status, text: yield* response.text }
      }).pipe(Effect.scoped)
    )
    expect(docs.status).toBe(200)
    expect(docs.text).toContain("<html")
    // The Scalar reference over the contract's paths, its script inline (it works offline).
    expect(docs.text).toContain('id="api-reference"')
    expect(docs.text).toContain("/api/session/{id}/chat")
    expect(docs.text).not.toMatch(/<script src="https?:/)
    expect(docs.text.length).toBeGreaterThan(1_000_000)
  })
})

describe("chat over SSE", () => {
  it("runs the tool loop, streams every event, records the turn, and sends upstream exactly the compiled context", async () => {
    gw.upstream.script(
      {
        type: "tool_calls",
        text: "Thought: read the file.",
        calls: [{ id: "call_a", name: "read_file", arguments: { path: "src/auth.ts" } }],
        usage: { prompt_tokens: 900, completion_tokens: 12 }
      },
      {
        type: "text",
        text: "The password check is inverted.",
        usage: { prompt_tokens: 1200, completion_tokens: 8 }
      }
    )
    const before = gw.upstream.requests.length
    const result = await gw.run(
      chatEvents("code-agent-auth", { message: "Why does login fail? Look at src/auth.ts", model: "gpt-4o" })
    )
    expect(result.status).toBe(200)
    expect(result.contentType).toContain("text/event-stream")
    // Text arrives in pieces: consecutive deltas count as one here.
    expect(
      result.events
        .map((e) => e.event)
        .filter((e, i, all) => e !== "text-delta" || all[i - 1] !== "text-delta")
    ).toEqual(["turn", "text-delta", "usage", "tool-call", "tool-result", "text-delta", "usage", "done"])
    const toolResult = result.events.find((e) => e.event === "tool-result")!.data as {
      result: { status: string; data: { content: string } }
    }
    expect(toolResult.result.status).toBe("success")
    expect(toolResult.result.data.content).toContain("export")
    const sent = gw.upstream.requests.slice(before)
    expect(sent).toHaveLength(2)
    // The second request carries the tool call and its (compressed) result, right after it.
    const second = sent[1]!.body.messages
    const callAt = second.findIndex(
      (m) =>
        Array.isArray(m.tool_calls) && (m.tool_calls as Array<{ id: string }>).some((c) => c.id === "call_a")
    )
    expect(second[callAt + 1]).toMatchObject({ role: "tool", tool_call_id: "call_a" })
    expect(
      second.filter((m) => m.role === "user" && String(m.content).startsWith("Why does login fail?"))
    ).toHaveLength(1)
    // The agent's tools on demand: the always-on ones; read_block only when the input asks for it.
    const toolNames = (body: { tools?: unknown }) =>
      ((body.tools ?? []) as ReadonlyArray<{ function: { name: string } }>).map((t) => t.function.name)
    expect(toolNames(sent[0]!.body)).toEqual([
      "read_file",
      "write_file",
      "list_files",
      "search",
      "dismiss_memory"
    ])
    // The first request is exactly what the compiler makes of the session with the input recorded.
    const doc = JSON.parse(historyText(gw.dataDir, "code-agent-auth")) as HistoryDocument
    const inputAt = doc.messages.findIndex(
      (m) =>
        m.meta.kind === "input" &&
        m.parts.some((p) => p._tag === "text" && p.text.startsWith("Why does login fail?"))
    )
    const compiled = await Effect.runPromise(
      compile({
        sessionId: "code-agent-auth",
        model: "gpt-4o",
        format: "openai",
        query: "",
        history: { ...doc, messages: doc.messages.slice(0, inputAt + 1) }
      }).pipe(
        Effect.provide(Layer.mergeAll(Workspace.layer(gw.dataDir), ModelRegistry.layer(), Tokenizer.layer()))
      )
    )
    expect(compiled.format).toBe("openai")
    if (compiled.format === "openai") expect(sent[0]!.body.messages).toEqual(compiled.request.messages)
    const history = JSON.parse(historyText(gw.dataDir, "code-agent-auth")) as {
      messages: Array<{ role: string; meta: { turn: number; kind?: string } }>
    }
    const turn = (result.events[0]!.data as { turn: number }).turn
    expect(
      history.messages.filter((m) => m.meta.turn === turn).map((m) => `${m.role}:${m.meta.kind}`)
    ).toEqual(["user:input", "assistant:step", "tool:step", "assistant:final"])
  })

  it("reports an upstream failure as an error event and resumes on retry without a second input", async () => {
    gw.upstream.script({ type: "error", status: 500, message: "upstream exploded" })
    const failed = await gw.run(
      chatEvents("code-agent-auth", { message: "Summarize the fix.", idempotencyKey: "k-1", model: "gpt-4o" })
    )
    expect(failed.events.at(-1)).toMatchObject({
      event: "error",
      data: { type: "error", tag: "UpstreamError" }
    })
    gw.upstream.script({ type: "text", text: "Fixed by negating the check." })
    const retried = await gw.run(
      chatEvents("code-agent-auth", { message: "Summarize the fix.", idempotencyKey: "k-1", model: "gpt-4o" })
    )
    expect(retried.events[0]).toMatchObject({ event: "turn", data: { resumed: true } })
    expect(retried.events.at(-1)).toMatchObject({
      event: "done",
      data: { text: "Fixed by negating the check." }
    })
    // A retry of the finished turn returns its answer without calling the model.
    const calls = gw.upstream.requests.length
    const again = await gw.run(
      chatEvents("code-agent-auth", { message: "Summarize the fix.", idempotencyKey: "k-1", model: "gpt-4o" })
    )
    expect(again.events.at(-1)).toMatchObject({
      event: "done",
      data: { text: "Fixed by negating the check." }
    })
    expect(gw.upstream.requests.length).toBe(calls)
    const history = JSON.parse(historyText(gw.dataDir, "code-agent-auth")) as {
      messages: Array<{ role: string; parts: Array<{ text?: string }> }>
    }
    expect(
      history.messages.filter((m) => m.role === "user" && m.parts[0]?.text === "Summarize the fix.")
    ).toHaveLength(1)
  })

  it("a broken stream is an error event and records nothing of the partial answer", async () => {
    gw.upstream.script({ type: "break", text: "half an answ" })
    const result = await gw.run(
      chatEvents("notebook-physics", { message: "Explain tunnelling.", model: "gpt-4o" })
    )
    expect(result.events.at(-1)?.event).toBe("error")
    const text = historyText(gw.dataDir, "notebook-physics")
    expect(text).not.toContain("half an answ")
    expect(text.split("Explain tunnelling.").length - 1).toBe(1)
  })

  it("runs 50 concurrent chats to one session: every input and answer recorded once, in order", async () => {
    await gw.run(Effect.flatMap(api, (c) => c.sessions.create({ payload: { id: "busy", concept: "load" } })))
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        gw.run(chatEvents("busy", { message: `message ${i}`, model: "gpt-4o" }))
      )
    )
    expect(results.every((r) => r.events.at(-1)?.event === "done")).toBe(true)
    const history = JSON.parse(historyText(gw.dataDir, "busy")) as {
      messages: Array<{
        role: string
        meta: { turn: number; kind?: string }
        parts: Array<{ text?: string }>
      }>
    }
    const inputs = history.messages.filter((m) => m.meta.kind === "input").map((m) => m.parts[0]?.text)
    expect(new Set(inputs).size).toBe(50)
    expect(inputs.sort()).toEqual(Array.from({ length: 50 }, (_, i) => `message ${i}`).sort())
    // Each turn is its input then its answer, turns in order.
    const kinds = history.messages.map((m) => `${m.meta.turn}:${m.meta.kind}`)
    expect(kinds).toEqual(Array.from({ length: 50 }, (_, i) => [`${i + 1}:input`, `${i + 1}:final`]).flat())
  }, 60_000)
})
