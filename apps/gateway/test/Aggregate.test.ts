/**
 * `POST /api/context/aggregate` through the gateway: sessions created and chatted through the API
 * with the fake model, aggregated into one request (deduplicated across sessions with every
 * provenance, ranked, within the model's budget, typed by format); the sessions' L2 promoted to
 * L3; 400 naming the field, 404 for an unknown session or model, an ended session skipped and
 * contributing nothing (not even through memory persisted when it ended), tenants kept apart, and
 * the path in the OpenAPI document.
 */
import { readFileSync } from "node:fs"
import { Api } from "@ctxo/api/Api"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, chatEvents, createSession, exampleData, startGateway } from "./harness.ts"

type Gateway = Awaited<ReturnType<typeof startGateway>>

let gw: Gateway
beforeAll(async () => {
  gw = await startGateway()
})
afterAll(() => gw.close())

/** One chat turn; the model answers `answer` (scripted) or its local echo. */
const chat = async (g: Gateway, sid: string, message: string, answer?: string) => {
  if (answer !== undefined) g.upstream.script({ type: "text", text: answer })
  const r = await g.run(chatEvents(sid, { message }))
  expect(r.events.at(-1)?.event, JSON.stringify(r.events.at(-1))).toBe("done")
}

const aggregate = (g: Gateway, body: unknown, headers: Record<string, string> = {}) =>
  call(g, "POST", "/api/context/aggregate", body, headers)

const systemPrompt = readFileSync(`${exampleData}/system-prompt.md`, "utf8").trim()
const remember = "Please remember: the Kestrel release ships on 2026-12-01."
const noted = "Noted: Kestrel ships on 2026-12-01."

describe("POST /api/context/aggregate", () => {
  beforeAll(async () => {
    await createSession(gw, "agg-alpha")
    await createSession(gw, "agg-beta")
    await chat(gw, "agg-alpha", "What does the dashboard show today?")
    await chat(gw, "agg-alpha", remember, noted)
    await chat(gw, "agg-beta", remember, noted)
    await chat(gw, "agg-beta", "Which team owns the build pipeline?", "The platform team owns it.")
  })

  it("aggregates sessions into one request: shared content once, with both provenances, first", async () => {
    const out = await gw.run(
      Effect.gen(function* () {
        const client = yield* HttpApiClient.make(Api)
        return yield* client.aggregate.aggregate({
          payload: { sessions: ["agg-alpha", "agg-beta"], query: "When does Kestrel ship?" }
        })
      })
    )
    expect(out.format).toBe("openai")
    expect(out.model).toBe("openai/gpt-4o")
    expect(out.skipped).toEqual([])
    expect(out.sessions.map((s) => [s.session, s.state])).toEqual([
      ["agg-alpha", "active"],
      ["agg-beta", "active"]
    ])
    // The one request: the data root's system prompt, the blocks, the query.
    if (out.format !== "openai") throw new Error("openai expected")
    const messages = out.request.messages
    expect(messages.map((m) => m.role)).toEqual(["system", "system", "user"])
    expect(messages[0]!.content).toBe(systemPrompt)
    expect(messages[2]!.content).toBe("When does Kestrel ship?")
    const context = messages[1]!.content
    expect(context).toContain("## Session agg-alpha")
    expect(context).toContain("## Session agg-beta")
    expect(context.split(noted).length - 1).toBe(1)
    // The shared turn: one block, both sessions, ranked first and kept.
    const first = out.blocks[0]!
    expect(first).toMatchObject({
      session: "agg-alpha",
      sessions: ["agg-alpha", "agg-beta"],
      level: "L1",
      source: "recent_history",
      status: "included"
    })
    expect(first.score).toBeGreaterThan(0)
    expect(first.provenance.map((p) => [p.session, p.level, p.source, p.unit])).toEqual([
      ["agg-alpha", "L1", "recent_history", "turn-2"],
      ["agg-beta", "L1", "recent_history", "turn-1"]
    ])
    for (const b of out.blocks) {
      expect(["agg-alpha", "agg-beta"]).toContain(b.session)
      expect(b.provenance[0]!.session).toBe(b.session)
    }
    // Within the budget, counted whole.
    const report = out.report as { total: number; available: number }
    expect(report.total).toBeLessThanOrEqual(report.available)
    expect(report.available).toBe(115_200)
  })

  it("promotes the sessions' L2 to L3", async () => {
    const r = await aggregate(gw, { sessions: ["agg-alpha", "agg-beta"], query: "Kestrel?" })
    expect(r.status).toBe(200)
    expect(r.json.promoted).toBeGreaterThan(0)
    const l3 = await call(gw, "GET", "/api/memory?level=L3")
    expect(l3.status).toBe(200)
    const kestrel = l3.json.entries.find((e: { text: string }) => e.text.includes("Kestrel"))
    expect(kestrel.sources.map((s: { session: string }) => s.session).sort()).toEqual([
      "agg-alpha",
      "agg-beta"
    ])
  })

  it("renders the request in the format asked for", async () => {
    const anthropic = await aggregate(gw, {
      sessions: ["agg-beta"],
      query: "Who owns the build pipeline?",
      format: "anthropic",
      model: "claude-sonnet-4-5"
    })
    expect(anthropic.status).toBe(200)
    expect(anthropic.json.format).toBe("anthropic")
    expect(anthropic.json.model).toBe("anthropic/claude-sonnet-4-5")
    expect(anthropic.json.request.system).toContain(systemPrompt)
    expect(anthropic.json.request.system).toContain("The platform team owns it.")
    expect(anthropic.json.request.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "Who owns the build pipeline?" }] }
    ])
    const react = await aggregate(gw, { sessions: ["agg-beta"], query: "Who owns it?", format: "react" })
    expect(react.json.request.prompt).toMatch(
      /^\[system\] You are a patient tutor[\s\S]*\[user\] Who owns it\?$/
    )
  })

  it("cuts to a small model's budget and says why each block left out is out", async () => {
    const r = await aggregate(gw, {
      sessions: ["agg-alpha", "agg-beta", "notebook-physics", "code-agent-auth"],
      query: "When does Kestrel ship?",
      model: "gpt-4"
    })
    expect(r.status).toBe(200)
    expect(r.json.report.available).toBe(7_372)
    expect(r.json.report.total).toBeLessThanOrEqual(r.json.report.available)
    const dropped = r.json.blocks.filter((b: { status: string }) => b.status === "dropped")
    for (const b of dropped) expect(b.reason).toEqual(expect.any(String))
    // The Kestrel turn first: L1 in the two sessions that had it, L3 (promoted above) in the others.
    expect(r.json.blocks[0]).toMatchObject({ session: "agg-alpha", status: "included" })
    expect(r.json.blocks[0].sessions).toEqual(expect.arrayContaining(["agg-alpha", "agg-beta"]))
  })

  it("is 400 naming the field for an empty list, an empty query or an unknown field", async () => {
    const none = await aggregate(gw, { sessions: [], query: "hi" })
    expect(none.status).toBe(400)
    expect(none.json.error.message).toBe("sessions: list at least one session to aggregate")
    const empty = await aggregate(gw, { sessions: ["agg-alpha"], query: "" })
    expect(empty.status).toBe(400)
    expect(empty.json.error.message).toMatch(
      /^query: the question the aggregated context is for cannot be empty/
    )
    const blank = await aggregate(gw, { sessions: ["agg-alpha"], query: "   " })
    expect(blank.status).toBe(400)
    expect(blank.json.error.message).toMatch(/^query: /)
    const unknown = await aggregate(gw, { sessions: ["agg-alpha"], query: "hi", extra: 1 })
    expect(unknown.status).toBe(400)
    expect(unknown.json.error.message).toMatch(/extra/)
  })

  it("is 404 for an unknown session (named) or model", async () => {
    const ghost = await aggregate(gw, { sessions: ["agg-alpha", "ghost"], query: "hi" })
    expect(ghost.status).toBe(404)
    expect(ghost.json.error).toMatchObject({ tag: "SessionNotFound", message: "No session ghost" })
    const model = await aggregate(gw, { sessions: ["agg-alpha"], query: "hi", model: "nope-9000" })
    expect(model.status).toBe(404)
  })

  it("skips an ended session, which contributes nothing, not even through memory it left", async () => {
    const sid = "agg-ended"
    await createSession(gw, sid)
    await chat(
      gw,
      sid,
      "Please remember: the secret word of the Falcon team is PLATYPUS.",
      "Noted: PLATYPUS."
    )
    expect((await call(gw, "POST", `/api/sessions/${sid}/end`)).status).toBe(200)
    // Ending persists its memory (L2 -> L3 -> L4, on the event bus): wait for it.
    for (let i = 0; i < 100; i++) {
      const l4 = await call(gw, "GET", "/api/memory?level=L4")
      if (l4.text.includes("PLATYPUS")) break
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    expect((await call(gw, "GET", "/api/memory?level=L4")).text).toContain("PLATYPUS")
    const r = await aggregate(gw, { sessions: [sid, "agg-alpha"], query: "What is the secret word?" })
    expect(r.status).toBe(200)
    expect(r.json.skipped).toEqual([
      { session: sid, reason: "ended", message: expect.stringContaining("ended") }
    ])
    expect(JSON.stringify(r.json.request)).not.toContain("PLATYPUS")
    expect(JSON.stringify(r.json.blocks)).not.toContain(sid)
    expect(r.json.sessions).toEqual([expect.objectContaining({ session: "agg-alpha", withheld: 1 })])
  })

  it("is in the OpenAPI document", async () => {
    const spec = await call(gw, "GET", "/openapi.json")
    const post = spec.json.paths["/api/context/aggregate"]?.post
    expect(post.summary).toEqual(expect.any(String))
    expect(Object.keys(post.responses)).toEqual(expect.arrayContaining(["200", "400", "404"]))
    expect(post.requestBody.content["application/json"]).toBeDefined()
  })
})

describe("tenants", () => {
  it("sees only the caller's sessions: another tenant's session is unknown", async () => {
    const tenants = await startGateway({
      apiKeys: [
        { key: "key-a-0123456789abcdef", tenant: "a" },
        { key: "key-b-0123456789abcdef", tenant: "b" }
      ]
    })
    try {
      const as = (tenant: "a" | "b") => ({ authorization: `Bearer key-${tenant}-0123456789abcdef` })
      for (const [tenant, word] of [
        ["a", "ALBATROSS"],
        ["b", "BUFFALO"]
      ] as const) {
        expect(
          (await call(tenants, "POST", "/api/sessions", { id: `only-${tenant}`, concept: "x" }, as(tenant)))
            .status
        ).toBe(201)
        expect(
          (await call(tenants, "POST", "/api/sessions", { id: "both", concept: "x" }, as(tenant))).status
        ).toBe(201)
        tenants.upstream.script({ type: "text", text: `Noted: ${word}.` })
        const r = await call(
          tenants,
          "POST",
          "/api/sessions/both/chat",
          { message: `The code word is ${word}.` },
          as(tenant)
        )
        expect(r.status).toBe(200)
        expect(r.text).toContain("event: done")
      }
      // Sessions are per tenant, so the chat above went to each tenant's own `both`.
      const foreign = await aggregate(tenants, { sessions: ["both", "only-a"], query: "code word?" }, as("b"))
      expect(foreign.status).toBe(404)
      expect(foreign.json.error.message).toBe("No session only-a")
      const own = await aggregate(tenants, { sessions: ["both", "only-b"], query: "code word?" }, as("b"))
      expect(own.status).toBe(200)
      expect(JSON.stringify(own.json.request)).toContain("BUFFALO")
      expect(JSON.stringify(own.json.request)).not.toContain("ALBATROSS")
      expect((await aggregate(tenants, { sessions: ["both"], query: "code word?" })).status).toBe(401)
    } finally {
      await tenants.close()
    }
  })
})
