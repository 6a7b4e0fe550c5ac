/**
 * The gateway's edges as a client meets them: who may call which route whatever the spelling of the
 * path, what a body must be (JSON, within the size and nesting limits, matching the contract), and
 * what an error says (its status the same on `/api` and `/v1`, no paths, no long echoes, under 2 KB).
 */

import { request as httpRequest } from "node:http"
import { UpstreamError } from "@ctxo/agent/ModelClient"
import { Data, Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { STATUS, snakeCase, statusOf, toApiError } from "../src/ErrorMapping.ts"
import { historyText, startGateway } from "./harness.ts"

type Gateway = Awaited<ReturnType<typeof startGateway>>

interface Answer {
  readonly status: number
  readonly requestId: string | undefined
  readonly text: string
  readonly json: Record<string, unknown> | undefined
}

/** A request with the path exactly as given (fetch would normalize `..` and `//`). */
const send = (
  gw: Gateway,
  method: string,
  path: string,
  options: { readonly headers?: Record<string, string>; readonly body?: string | Array<string> } = {}
) =>
  new Promise<Answer>((resolve, reject) => {
    const url = new URL(gw.baseUrl)
    const req = httpRequest(
      { host: url.hostname, port: url.port, method, path, headers: options.headers ?? {} },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8")
          let json: Record<string, unknown> | undefined
          try {
            json = JSON.parse(text) as Record<string, unknown>
          } catch {
            json = undefined
          }
          const requestId = res.headers["x-request-id"]
          resolve({
            status: res.statusCode ?? 0,
            requestId: typeof requestId === "string" ? requestId : undefined,
            text,
            json
          })
        })
        res.on("error", reject)
      }
    )
    req.on("error", reject)
    if (Array.isArray(options.body)) for (const chunk of options.body) req.write(chunk)
    else if (options.body !== undefined) req.write(options.body)
    req.end()
  })

const jsonHeaders = (key?: string, contentType = "application/json") => ({
  "content-type": contentType,
  ...(key === undefined ? {} : { authorization: `Bearer ${key}` })
})

const keyA = "key-a-0123456789abcdef"
const admin = "admin-0123456789abcdef"

/** Spellings of one path that the router may or may not take for it. */
const variants = (path: string) => {
  const [first, ...rest] = path.slice(1).split("/")
  return {
    /** The router matches these to the same route. */
    same: [
      path,
      path.toUpperCase(),
      `/${first![0]!.toUpperCase()}${first!.slice(1)}/${rest.join("/")}`,
      `/${path}`,
      path.replace(/\//g, "//"),
      `${path}/`,
      `/%${first!.charCodeAt(0).toString(16)}${first!.slice(1)}/${rest.join("/")}`
    ],
    /** The router matches no route to these (or another one). */
    other: [`/api/..${path}`, `/${first}%2F${rest.join("%2F")}`, `/${first}/./${rest.join("/")}`]
  }
}

describe("authorization is decided on the route the router matches", () => {
  let gw: Gateway
  beforeAll(async () => {
    gw = await startGateway({
      apiKeys: [{ key: keyA, tenant: "acme" }],
      adminKey: Option.some(Redacted.make(admin)),
      tenantMaxConcurrent: 64
    })
  })
  afterAll(() => gw.close())

  it("gives /admin/tenants to the admin key only, however the path is spelled", async () => {
    const { same, other } = variants("/admin/tenants")
    for (const path of [...same, ...other]) {
      const none = await send(gw, "GET", path)
      expect(none.status, `no key ${path}`).toBe(401)
      expect(none.requestId).toMatch(/./)
      const tenant = await send(gw, "GET", path, { headers: jsonHeaders(keyA) })
      expect(tenant.status, `tenant key ${path}`).toBe(same.includes(path) ? 403 : 404)
      expect(tenant.text).not.toContain("acme")
    }
    for (const path of same) {
      const ok = await send(gw, "GET", path, { headers: jsonHeaders(admin) })
      expect(ok.status, `admin key ${path}`).toBe(200)
      // Each tenant's folder relative to the data root, never the server's absolute path.
      expect(ok.json).toEqual({ tenants: [{ tenant: "acme", sessions: 0, dataDir: "tenants/acme" }] })
    }
  })

  it("refuses the admin key (403) and a missing key (401) on every tenant route, however spelled", async () => {
    const spec = (await send(gw, "GET", "/openapi.json", { headers: jsonHeaders(keyA) })).json as {
      paths: Record<string, Record<string, unknown>>
    }
    const routes = Object.entries(spec.paths).flatMap(([path, methods]) =>
      Object.keys(methods).map((method) => ({
        method: method.toUpperCase(),
        path: path.replace(/\{id\}/g, "ghost")
      }))
    )
    // /metrics is the operator's (the admin key), like /admin/*.
    const tenantRoutes = routes.filter((r) => !/^\/(admin|healthz|readyz|metrics)/.test(r.path))
    expect(tenantRoutes.length).toBeGreaterThan(15)
    for (const route of tenantRoutes)
      for (const path of variants(route.path).same) {
        const body = route.method === "GET" || route.method === "DELETE" ? undefined : "{}"
        const asAdmin = await send(gw, route.method, path, {
          headers: jsonHeaders(admin),
          ...(body ? { body } : {})
        })
        expect(asAdmin.status, `admin key ${route.method} ${path}`).toBe(403)
        const none = await send(gw, route.method, path, { headers: jsonHeaders(), ...(body ? { body } : {}) })
        expect(none.status, `no key ${route.method} ${path}`).toBe(401)
        const tenant = await send(gw, route.method, path, {
          headers: jsonHeaders(keyA),
          ...(body ? { body } : {})
        })
        expect([401, 403], `tenant key ${route.method} ${path}`).not.toContain(tenant.status)
        expect(tenant.status).toBeLessThan(500)
      }
  }, 60_000)

  it("answers health to anyone, but tells where the data and the upstream are to the admin key only", async () => {
    for (const key of [undefined, keyA]) {
      const ready = await send(gw, "GET", "/readyz", { headers: jsonHeaders(key) })
      expect(ready.status).toBe(200)
      expect(ready.json).toEqual({ status: "ready", model: "gpt-4o" })
      expect(ready.text).not.toContain(gw.dataDir)
      expect(ready.text).not.toContain(gw.upstream.url)
    }
    const full = await send(gw, "GET", "/readyz", { headers: jsonHeaders(admin) })
    expect(full.json).toMatchObject({ status: "ready", upstream: expect.stringContaining(gw.upstream.url) })
    expect((await send(gw, "GET", "/HEALTHZ/")).status).toBe(200)
  })
})

describe("bodies", () => {
  let gw: Gateway
  const history = () => historyText(gw.dataDir, "code-agent-auth")
  beforeAll(async () => {
    gw = await startGateway({ maxBodyBytes: 64 * 1024 })
  })
  afterAll(() => gw.close())

  it("takes JSON only: a cross-site text/plain or form post gets 415 and writes nothing", async () => {
    const before = history()
    const calls = gw.upstream.requests.length
    const chat = JSON.stringify({ model: "gpt-4o", messages: [{ role: "user", content: "injected" }] })
    for (const type of [
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      ""
    ]) {
      const v1 = await send(gw, "POST", "/v1/chat/completions", {
        headers: { ...jsonHeaders(undefined, type), "x-ctxo-session": "code-agent-auth" },
        body: chat
      })
      expect(v1.status, type).toBe(415)
      expect(v1.json).toMatchObject({
        error: { type: "invalid_request_error", code: "unsupported_media_type" }
      })
      const api = await send(gw, "POST", "/api/session/code-agent-auth/chat", {
        headers: jsonHeaders(undefined, type),
        body: JSON.stringify({ message: "injected" })
      })
      expect(api.status, type).toBe(415)
      expect(api.json).toMatchObject({ error: { tag: "UnsupportedMediaType" } })
      expect(api.requestId).toMatch(/./)
      const put = await send(gw, "PUT", "/api/sessions/code-agent-auth/file?path=notes/x.md", {
        headers: jsonHeaders(undefined, type),
        body: JSON.stringify({ content: "injected" })
      })
      expect(put.status, type).toBe(415)
    }
    expect(history()).toBe(before)
    expect(history()).not.toContain("injected")
    expect(gw.upstream.requests.length).toBe(calls)
    // A JSON media type with a suffix is JSON.
    const vendor = await send(gw, "POST", "/api/sessions", {
      headers: jsonHeaders(undefined, "application/vnd.ctxo+json; charset=utf-8"),
      body: JSON.stringify({ id: "vendor-json", concept: "x" })
    })
    expect(vendor.status).toBe(201)
  })

  it("answers a broken multipart body and invalid JSON with 4xx in the error shape, never 500", async () => {
    const multipart = await send(gw, "POST", "/api/sessions", {
      headers: { "content-type": "multipart/form-data; boundary=zz" },
      body: '--zz\r\nContent-Disposition: form-data; name="a"\r\n\r\nbroken'
    })
    expect(multipart.status).toBe(415)
    for (const path of ["/api/sessions", "/v1/chat/completions", "/v1/compile"]) {
      const broken = await send(gw, "POST", path, { headers: jsonHeaders(), body: '{"concept": "x",' })
      expect(broken.status, path).toBe(400)
      expect(broken.json?.error, path).toBeDefined()
    }
  })

  it("refuses JSON nested deeper than 64 levels with a 400 that names the limit, on every body", async () => {
    const deepArray = `${"[".repeat(10_000)}${"]".repeat(10_000)}`
    const deepObject = `${'{"a":'.repeat(10_000)}1${"}".repeat(10_000)}`
    for (const body of [deepArray, deepObject])
      for (const [method, path] of [
        ["POST", "/api/sessions"],
        ["POST", "/v1/chat/completions"],
        ["POST", "/v1/compile"],
        ["PUT", "/api/sessions/code-agent-auth/config"],
        ["POST", "/api/session/code-agent-auth/chat"]
      ] as const) {
        const answer = await send(gw, method, path, { headers: jsonHeaders(), body })
        expect(answer.status, `${method} ${path}`).toBe(400)
        expect(answer.text).toContain("64")
      }
    // Brackets inside strings are text, not nesting.
    const ok = await send(gw, "POST", "/api/sessions", {
      headers: jsonHeaders(),
      body: JSON.stringify({ id: "brackets", concept: "[".repeat(1000) })
    })
    expect(ok.status).toBe(201)
  })

  it("answers a chunked body over the limit with a 413 the client reads, and keeps serving", async () => {
    const chunk = `"${"x".repeat(16 * 1024)}",`
    const answer = await send(gw, "POST", "/api/sessions", {
      headers: { ...jsonHeaders(), "transfer-encoding": "chunked" },
      body: ['{"concept": [', ...Array.from({ length: 12 }, () => chunk), '""]}']
    })
    expect(answer.status).toBe(413)
    expect(answer.json).toMatchObject({ error: { tag: "PayloadTooLarge" } })
    const chunked = await send(gw, "POST", "/v1/chat/completions", {
      headers: { ...jsonHeaders(), "transfer-encoding": "chunked" },
      body: ['{"model": "gpt-4o", "messages": [', ...Array.from({ length: 12 }, () => chunk), "]}"]
    })
    expect(chunked.status).toBe(413)
    expect(chunked.json).toMatchObject({ error: { code: "payload_too_large" } })
    // Within the limit a chunked body is read as any other.
    const small = await send(gw, "POST", "/api/sessions", {
      headers: { ...jsonHeaders(), "transfer-encoding": "chunked" },
      body: ['{"id": "chunked", ', '"concept": "ok"}']
    })
    expect(small.status).toBe(201)
  })

  it("decodes /v1/chat/completions with the contract: a malformed message is a 400 naming the field", async () => {
    const post = (body: unknown) =>
      send(gw, "POST", "/v1/chat/completions", { headers: jsonHeaders(), body: JSON.stringify(body) })
    const cases: Array<[unknown, string]> = [
      [{ model: "gpt-4o", messages: [null] }, "messages[0]"],
      [{ model: "gpt-4o", messages: [1] }, "messages[0]"],
      [{ model: "gpt-4o", messages: [{ role: "user", content: 5 }] }, "messages[0].content"],
      [
        { model: "gpt-4o", messages: [{ role: "assistant", content: null, tool_calls: [{}] }] },
        "messages[0].tool_calls[0].id"
      ],
      [{ model: "gpt-4o", messages: [{ role: "user", content: "hi" }], tools: [null] }, "tools[0]"],
      [{ model: "gpt-4o", messages: [{ role: "tool", content: "x" }] }, "messages[0].tool_call_id"],
      [{ messages: [] }, "model"],
      [{ model: "gpt-4o", messages: "hi" }, "messages"]
    ]
    for (const [body, param] of cases) {
      const answer = await post(body)
      expect(answer.status, JSON.stringify(body)).toBe(400)
      const error = answer.json?.error as Record<string, unknown>
      expect(error.type).toBe("invalid_request_error")
      expect(error.param, JSON.stringify(body)).toBe(param)
      expect(String(error.message)).toContain(param)
      expect(String(error.message).length).toBeLessThanOrEqual(300)
    }
    // Parameters the schema does not name pass through to the upstream.
    const ok = await post({
      model: "gpt-4o",
      messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
      temperature: 0.3,
      max_tokens: 50
    })
    expect(ok.status).toBe(200)
    expect(gw.upstream.requests.at(-1)?.body).toMatchObject({ temperature: 0.3, max_tokens: 50 })
  })
})

describe("errors", () => {
  let gw: Gateway
  beforeAll(async () => {
    gw = await startGateway({ upstreamTimeoutMs: 500 })
  })
  afterAll(() => gw.close())

  it("decodes a config write with the contract: a body that is not an object is a 400, and nothing is written", async () => {
    const path = "/api/sessions/code-agent-auth/config"
    const before = await send(gw, "GET", path)
    for (const body of ["[1, 2]", '"text"', "null", "42"]) {
      const res = await send(gw, "PUT", path, { headers: jsonHeaders(), body })
      expect(res.status, body).toBe(400)
    }
    const bad = await send(gw, "PUT", path, {
      headers: jsonHeaders(),
      body: JSON.stringify({ policy: "fancy" })
    })
    expect(bad.status).toBe(422)
    expect(bad.json).toMatchObject({ error: { tag: "InvalidManifest" } })
    expect((await send(gw, "GET", path)).json).toEqual(before.json)
  })

  it("gives an unknown model 404 on /api and /v1 (OpenAI's model_not_found there)", async () => {
    const v1 = await send(gw, "POST", "/v1/chat/completions", {
      headers: jsonHeaders(),
      body: JSON.stringify({ model: "no-such-model-xyz", messages: [{ role: "user", content: "hi" }] })
    })
    expect(v1.status).toBe(404)
    expect(v1.json).toMatchObject({ error: { code: "model_not_found", type: "invalid_request_error" } })
    const api = await send(gw, "GET", "/api/session/code-agent-auth/context-preview?model=no-such-model-xyz")
    expect(api.status).toBe(404)
    expect(api.json).toMatchObject({ error: { tag: "UnknownModel" } })
  })

  it("maps an upstream timeout to 504 and an upstream 5xx to 502", async () => {
    const post = () =>
      send(gw, "POST", "/v1/chat/completions", {
        headers: jsonHeaders(),
        body: JSON.stringify({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }] })
      })
    gw.upstream.script({ type: "hang" })
    const timeout = await post()
    expect(timeout.status).toBe(504)
    expect(timeout.json).toMatchObject({ error: { type: "upstream_error" } })
    gw.upstream.script(
      { type: "error", status: 500, message: "boom" },
      { type: "error", status: 500, message: "boom" },
      { type: "error", status: 500, message: "boom" }
    )
    const bad = await post()
    expect(bad.status).toBe(502)
  }, 20_000)

  it("never sends back a whole submitted value, a schema, an absolute path or more than 2 KB", async () => {
    const huge = "x".repeat(100_000)
    const answers = [
      await send(gw, "POST", "/api/sessions", {
        headers: jsonHeaders(),
        body: JSON.stringify({ concept: [huge] })
      }),
      await send(gw, "POST", "/api/sessions", {
        headers: jsonHeaders(),
        body: JSON.stringify({ concept: "c", [huge.slice(0, 5000)]: 1 })
      }),
      await send(gw, "POST", "/api/sessions", {
        headers: jsonHeaders(),
        body: JSON.stringify({ id: huge, concept: "c" })
      }),
      await send(gw, "GET", `/api/sessions/code-agent-auth/file?path=${"a".repeat(300)}.md`),
      await send(gw, "GET", `/api/sessions/${"s".repeat(300)}/file?path=x.md`),
      await send(gw, "PUT", `/api/sessions/code-agent-auth/file?path=${"d".repeat(300)}/x.md`, {
        headers: jsonHeaders(),
        body: JSON.stringify({ content: "x" })
      }),
      await send(gw, "POST", "/v1/chat/completions", {
        headers: jsonHeaders(),
        body: JSON.stringify({ model: huge, messages: [{ role: "user", content: huge }] })
      }),
      await send(gw, "POST", "/v1/chat/completions", {
        headers: jsonHeaders(),
        body: JSON.stringify({ model: "gpt-4o", messages: [{ role: "user", content: { text: huge } }] })
      }),
      await send(gw, "PUT", "/api/sessions/code-agent-auth/config", {
        headers: jsonHeaders(),
        body: JSON.stringify({ policy: huge })
      })
    ]
    for (const answer of answers) {
      expect(answer.status, answer.text.slice(0, 200)).toBeGreaterThanOrEqual(400)
      expect(answer.status, answer.text.slice(0, 200)).toBeLessThan(500)
      expect(Buffer.byteLength(answer.text), answer.text.slice(0, 200)).toBeLessThanOrEqual(2048)
      expect(answer.text).not.toMatch(/x{121}|a{121}|s{121}|d{121}/)
      expect(answer.text).not.toContain(gw.dataDir)
      expect(answer.text).not.toMatch(/at .*\.ts:\d+/)
      expect(answer.json?.error).toBeDefined()
    }
  })

  it("has a status for every domain error, and an error without one does not compile", () => {
    for (const status of Object.values(STATUS))
      if (typeof status === "number")
        expect([400, 404, 409, 413, 415, 422, 429, 500, 502, 504]).toContain(status)
    class Unlisted extends Data.TaggedError("Unlisted")<{ readonly message: string }> {}
    expect(snakeCase("HistoryIOError")).toBe("history_io_error")
    // @ts-expect-error an error the status table does not list is refused by the compiler
    expect(toApiError(new Unlisted({ message: "new" }))).toMatchObject({
      _tag: "ServerError",
      tag: "Unlisted"
    })
  })

  it("gives every upstream failure a status by its kind, falling back when the kind is absent", () => {
    // Built without validation: an error from before `kind` existed has none.
    const upstream = (fields: { status?: number; code?: string; reason: string }, kind?: string) =>
      new UpstreamError({ ...fields, ...(kind === undefined ? {} : { kind }) } as never, true)
    expect(statusOf(upstream({ reason: "no data for 500 ms" }, "timeout"))).toBe(504)
    expect(statusOf(upstream({ reason: "socket hang up" }, "network"))).toBe(502)
    expect(statusOf(upstream({ status: 503, reason: "unavailable" }, "status"))).toBe(502)
    expect(statusOf(upstream({ status: 429, reason: "slow down" }, "status"))).toBe(429)
    expect(statusOf(upstream({ status: 401, reason: "bad upstream key" }, "status"))).toBe(502)
    expect(statusOf(upstream({ status: 400, code: "context_length_exceeded", reason: "too long" }))).toBe(400)
    expect(statusOf(upstream({ reason: "Request timed out." }))).toBe(504)
    expect(statusOf(upstream({ reason: "stream ended early" }))).toBe(502)
  })
})
