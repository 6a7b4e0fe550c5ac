import { Option, Redacted } from "effect"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startGateway } from "./harness.ts"

const keyA = "key-a-0123456789abcdef"
const keyB = "key-b-0123456789abcdef"
const admin = "admin-0123456789abcdef"

let gw: Awaited<ReturnType<typeof startGateway>>
beforeAll(async () => {
  gw = await startGateway({
    apiKeys: [
      { key: keyA, tenant: "acme" },
      { key: keyB, tenant: "globex" }
    ],
    adminKey: Option.some(Redacted.make(admin)),
    tenantMaxConcurrent: 2,
    upstreamTimeoutMs: 1_000
  })
})
afterAll(() => gw.close())

const call = (path: string, key?: string, init: RequestInit = {}) =>
  fetch(`${gw.baseUrl}${path}`, {
    ...init,
    headers: {
      "content-type": "application/json",
      ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
      ...init.headers
    }
  })
const json = async (r: Response) => ({ status: r.status, body: (await r.json()) as Record<string, unknown> })

describe("API keys and tenants", () => {
  it("answers 401 without a key or with a wrong one, except on health", async () => {
    expect((await call("/healthz")).status).toBe(200)
    expect(await json(await call("/api/sessions"))).toMatchObject({
      status: 401,
      body: { error: { tag: "Unauthorized" } }
    })
    expect(await json(await call("/api/sessions", "not-a-key-0123456789"))).toMatchObject({ status: 401 })
    const sdk = new OpenAI({ apiKey: "wrong-key-0123456789", baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    expect(await sdk.models.list().catch((e: unknown) => e)).toBeInstanceOf(OpenAI.AuthenticationError)
  })

  it("keeps each tenant's sessions its own: another tenant can neither read nor write them", async () => {
    expect(
      (
        await call("/api/sessions", keyA, {
          method: "POST",
          body: JSON.stringify({ id: "plan", concept: "acme plan" })
        })
      ).status
    ).toBe(201)
    expect(
      (
        await call("/api/sessions/plan/file?path=secret.md", keyA, {
          method: "PUT",
          body: JSON.stringify({ content: "acme secret" })
        })
      ).status
    ).toBe(200)
    // globex sees no session "plan", cannot read or write its files, and its own list is empty.
    expect((await json(await call("/api/sessions", keyB))).body).toEqual([])
    expect((await call("/api/sessions/plan", keyB)).status).toBe(404)
    expect((await call("/api/sessions/plan/file?path=secret.md", keyB)).status).toBe(404)
    expect(
      (
        await call("/api/sessions/plan/file?path=secret.md", keyB, {
          method: "PUT",
          body: JSON.stringify({ content: "overwritten" })
        })
      ).status
    ).toBe(404)
    expect((await call("/api/sessions/..%2Facme%2Fplan", keyB)).status).toBeGreaterThanOrEqual(400)
    const read = await json(await call("/api/sessions/plan/file?path=secret.md", keyA))
    expect(read.body.content).toBe("acme secret")
    // A session of the same name in globex is a different session.
    expect(
      (
        await call("/api/sessions", keyB, {
          method: "POST",
          body: JSON.stringify({ id: "plan", concept: "globex plan" })
        })
      ).status
    ).toBe(201)
    expect((await json(await call("/api/sessions/plan", keyA))).body.concept).toBe("acme plan")
    expect((await json(await call("/api/sessions/plan", keyB))).body.concept).toBe("globex plan")
  })

  it("gives the management endpoints to the admin key only (403 for a tenant's key)", async () => {
    expect((await call("/admin/tenants", keyA)).status).toBe(403)
    expect((await call("/admin/tenants")).status).toBe(401)
    const listed = await json(await call("/admin/tenants", admin))
    expect(listed).toMatchObject({
      status: 200,
      body: { tenants: [{ tenant: "acme" }, { tenant: "globex" }] }
    })
    expect((await call("/api/sessions", admin)).status).toBe(403)
  })

  it("keeps every tenant's sessions in one session cache, each tenant's apart", async () => {
    const entries = async (holder: string) => {
      const text = await (await call("/metrics", admin)).text()
      return Number(
        new RegExp(`^ctxo_session_cache_entries\\{holder="${holder}"\\} (\\d+)$`, "m").exec(text)?.[1]
      )
    }
    const before = await entries("store history state")
    for (const key of [keyA, keyB]) {
      const made = await call("/api/sessions", key, {
        method: "POST",
        body: JSON.stringify({ id: "cached", concept: "one cache" })
      })
      expect(made.status).toBe(201)
      const turn = await call("/v1/chat/completions", key, {
        method: "POST",
        headers: { "x-ctxo-session": "cached" },
        body: JSON.stringify({ model: "gpt-4o", messages: [{ role: "user", content: "Hello" }] })
      })
      expect(turn.status).toBe(200)
      await turn.text()
    }
    // Each tenant's store keeps its own session "cached" in the process's one cache: two more.
    expect(await entries("store history state")).toBe((Number.isNaN(before) ? 0 : before) + 2)
    expect(await entries("decoded history")).toBeGreaterThanOrEqual(2)
    expect(await entries("engine last compile")).toBeGreaterThanOrEqual(2)
  })

  it("limits a tenant's concurrent requests with 429 and Retry-After, without slowing the others", async () => {
    await call("/api/sessions", keyA, { method: "POST", body: JSON.stringify({ id: "slow", concept: "" }) })
    gw.upstream.script({ type: "hang" }, { type: "hang" })
    const chat = () =>
      call("/api/session/slow/chat", keyA, {
        method: "POST",
        body: JSON.stringify({ message: "wait", model: "gpt-4o" })
      })
    const first = chat()
    const second = chat()
    await new Promise((r) => setTimeout(r, 300))
    const third = await call("/api/sessions", keyA)
    expect(third.status).toBe(429)
    expect(third.headers.get("retry-after")).toBe("1")
    expect((await call("/api/sessions", keyB)).status).toBe(200)
    await Promise.all([first, second].map((p) => p.then((r) => r.text())))
  }, 30_000)
})
