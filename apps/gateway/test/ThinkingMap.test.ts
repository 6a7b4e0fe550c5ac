/**
 * The thinking map over HTTP: a session without a map is a 404, a map is written (validated, with
 * If-Match) and read back with its version, an invalid one is refused naming the node and the
 * field, and a node's context comes back as seven sections with tokens; a chat message sent with
 * `node` (or, on `/v1/chat/completions`, the `x-ctxo-node` header) lands in the history and then in
 * that node's conversation section (only there).
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { Api } from "@ctxo/api/Api"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, chatEvents, createSession, historyText, startGateway } from "./harness.ts"

type Gateway = Awaited<ReturnType<typeof startGateway>>

let gw: Gateway
beforeAll(async () => {
  gw = await startGateway()
})
afterAll(() => gw.close())

const plan = {
  title: "Launch the docs site",
  coreQuestion: "What has to happen before the docs site goes live?",
  finalGoal: "docs.example.org serves the 2.0 docs",
  nodes: [
    { id: "launch", title: "Launch", question: "What is left?" },
    {
      id: "domain",
      title: "Domain and TLS",
      parent: "launch",
      status: "done",
      conclusion: "docs.example.org points at the CDN; the certificate renews itself."
    },
    {
      id: "content",
      title: "Port the content",
      parent: "launch",
      status: "in-progress",
      question: "Which pages move first?",
      dependencies: ["domain"]
    },
    { id: "redirects", title: "Redirect old URLs", parent: "content", status: "open" }
  ]
}

describe("the map file", () => {
  it("is 404 until written, then read back with its version; a stale If-Match is 409", async () => {
    const sid = "map-file"
    await createSession(gw, sid)
    const none = await call(gw, "GET", `/api/sessions/${sid}/map`)
    expect(none.status).toBe(404)
    expect(none.json.error).toMatchObject({
      tag: "MapNotFound",
      message: `Session ${sid} has no thinking map yet (map.json): write one first`
    })

    const put = await call(gw, "PUT", `/api/sessions/${sid}/map`, plan)
    expect(put.status, put.text).toBe(200)
    expect(put.json.path).toBe("map.json")
    const got = await call(gw, "GET", `/api/sessions/${sid}/map`)
    expect(got.status).toBe(200)
    expect(got.json).toEqual({ path: "map.json", version: put.json.version, map: plan })
    // A regular session file, the same one the files API shows.
    expect(JSON.parse(readFileSync(join(gw.dataDir, sid, "map.json"), "utf8"))).toEqual(plan)

    const changed = { ...plan, finalGoal: "docs.example.org serves the 2.1 docs" }
    const fresh = await call(gw, "PUT", `/api/sessions/${sid}/map`, changed, {
      "if-match": `"${put.json.version}"`
    })
    expect(fresh.status).toBe(200)
    const stale = await call(gw, "PUT", `/api/sessions/${sid}/map`, plan, { "if-match": put.json.version })
    expect(stale.status).toBe(409)
    expect(stale.json.error.tag).toBe("VersionConflict")
    expect((await call(gw, "GET", `/api/sessions/${sid}/map`)).json.map).toEqual(changed)
    expect((await call(gw, "GET", "/api/sessions/no-such-session/map")).status).toBe(404)
  })

  it("refuses an invalid map naming the node and the field, and writes nothing", async () => {
    const sid = "map-invalid"
    await createSession(gw, sid)
    const unknownParent = {
      ...plan,
      nodes: [...plan.nodes, { id: "search", title: "Search", parent: "nowhere" }]
    }
    const bad = await call(gw, "PUT", `/api/sessions/${sid}/map`, unknownParent)
    expect(bad.status).toBe(422)
    expect(bad.json.error).toMatchObject({
      tag: "InvalidMap",
      message: `Invalid thinking map ${sid}/map.json: node "search": parent: no node "nowhere" in the map`,
      details: { node: "search", field: "parent" }
    })
    const wrongType = { ...plan, nodes: [plan.nodes[0], { id: "x", title: "X", dependencies: "domain" }] }
    const typed = await call(gw, "PUT", `/api/sessions/${sid}/map`, wrongType)
    expect(typed.status).toBe(422)
    expect(typed.json.error.message).toMatch(
      new RegExp(`^Invalid thinking map ${sid}/map\\.json: node "x": nodes\\[1\\]\\.dependencies: expected`)
    )
    expect((await call(gw, "PUT", `/api/sessions/${sid}/map`, [1, 2])).status).toBe(400)
    expect((await call(gw, "GET", `/api/sessions/${sid}/map`)).status).toBe(404)
  })
})

describe("a node's context", () => {
  it("is seven sections with tokens; a chat sent with node joins that node's conversation only", async () => {
    const sid = "map-context"
    await createSession(gw, sid)
    expect((await call(gw, "PUT", `/api/sessions/${sid}/map`, plan)).status).toBe(200)

    gw.upstream.script({ type: "text", text: "Start with the getting-started guide." })
    const turn = await gw.run(chatEvents(sid, { message: "Which page should move first?", node: "content" }))
    expect(turn.events.at(-1)?.event).toBe("done")
    gw.upstream.script({ type: "text", text: "It renews itself." })
    await gw.run(chatEvents(sid, { message: "Does the certificate renew?", node: "domain" }))

    // The node is recorded on the turn's input.
    const history = JSON.parse(historyText(gw.dataDir, sid)) as {
      messages: ReadonlyArray<{ role: string; meta: { turn: number; kind?: string; node?: string } }>
    }
    expect(
      history.messages.filter((m) => m.meta.kind === "input").map((m) => [m.meta.turn, m.meta.node])
    ).toEqual([
      [1, "content"],
      [2, "domain"]
    ])

    const context = await gw.run(
      Effect.gen(function* () {
        const client = yield* HttpApiClient.make(Api)
        return yield* client.map.nodeContext({
          path: { id: sid, nodeId: "content" },
          urlParams: { model: "gpt-4o" }
        })
      })
    )
    expect(context.model).toBe("gpt-4o")
    expect(context.sections.map((s) => s.id)).toEqual([
      "background",
      "map",
      "node",
      "ancestors",
      "dependencies",
      "children",
      "conversation"
    ])
    for (const section of context.sections) {
      expect(section.tokens).toBeGreaterThan(0)
      expect(section.dropped).toBe(0)
    }
    const text = (id: string) => context.sections.find((s) => s.id === id)!.text
    expect(text("dependencies")).toContain(
      "- Domain and TLS [domain] (done)\n  Conclusion: docs.example.org points at the CDN; the certificate renews itself."
    )
    expect(text("ancestors")).toContain("- Launch [launch]")
    expect(text("children")).toContain("- Redirect old URLs [redirects] (open)")
    expect(text("conversation")).toBe(
      [
        "## 7. Conversation about this node",
        "Turn 1, user: Which page should move first?",
        "Turn 1, assistant: Start with the getting-started guide."
      ].join("\n")
    )
    expect(context.info.conversation).toHaveLength(2)
    expect(context.text).not.toContain("certificate renew?")
    expect(context.tokens).toBeGreaterThan(context.sections[0]!.tokens)
    expect(context.tokens).toBeLessThanOrEqual(context.budget)

    // A tiny budget cuts whole items and says so.
    const tiny = await call(gw, "GET", `/api/sessions/${sid}/map/nodes/content/context?budget=60`)
    expect(tiny.status).toBe(200)
    expect(tiny.json.budget).toBe(60)
    const cut = tiny.json.sections.filter((s: { dropped: number }) => s.dropped > 0)
    expect(cut.length).toBeGreaterThan(0)
    for (const s of cut) expect(s.text).toMatch(/left out: over this section's \d+ tokens\]$/)

    const missing = await call(gw, "GET", `/api/sessions/${sid}/map/nodes/nope/context`)
    expect(missing.status).toBe(404)
    expect(missing.json.error).toMatchObject({
      tag: "MapNodeNotFound",
      message: `The thinking map ${sid}/map.json has no node "nope"`
    })
  })

  it("takes the node of a /v1/chat/completions turn from x-ctxo-node", async () => {
    const sid = "map-openai"
    await createSession(gw, sid)
    expect((await call(gw, "PUT", `/api/sessions/${sid}/map`, plan)).status).toBe(200)
    gw.upstream.script({ type: "text", text: "The old /guide/* paths." })
    const answer = await call(
      gw,
      "POST",
      "/v1/chat/completions",
      { model: "gpt-4o", messages: [{ role: "user", content: "Which URLs need redirects?" }] },
      { "x-ctxo-session": sid, "x-ctxo-node": "redirects" }
    )
    expect(answer.status, answer.text).toBe(200)
    const context = await call(gw, "GET", `/api/sessions/${sid}/map/nodes/redirects/context`)
    expect(context.json.sections[6].text).toBe(
      [
        "## 7. Conversation about this node",
        "Turn 1, user: Which URLs need redirects?",
        "Turn 1, assistant: The old /guide/* paths."
      ].join("\n")
    )
    const other = await call(gw, "GET", `/api/sessions/${sid}/map/nodes/content/context`)
    expect(other.json.info.conversation).toEqual([])
  })

  it("serves the example session's release map", async () => {
    const context = await call(gw, "GET", "/api/sessions/code-agent-auth/map/nodes/fix/context")
    expect(context.status, context.text).toBe(200)
    expect(context.json.sections[4].text).toContain("isExpired in src/auth.ts compares the wrong way round")
  })
})
