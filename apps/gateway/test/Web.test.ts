/**
 * The workbench page served by the gateway: `index.html` at `/` and at the page's own routes, its
 * hashed assets, a 503 that says how to build a page that is missing; the page is public while the
 * API keeps its keys and its 404s; and the chat's `done` event carries the parts the stream carried.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createPartAccumulator, pushChatEvent } from "@ctxo/history/PartAccumulator"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, chatEvents, startGateway } from "./harness.ts"

const KEY = "web-test-key-0123456789"
const INDEX =
  '<!doctype html><html><head><title>ctxo workbench</title></head><body><div id="root"></div></body></html>'

let webDir: string
let open: Awaited<ReturnType<typeof startGateway>>
let keyed: Awaited<ReturnType<typeof startGateway>>
beforeAll(async () => {
  webDir = mkdtempSync(join(tmpdir(), "ctxo-web-"))
  mkdirSync(join(webDir, "assets"))
  writeFileSync(join(webDir, "index.html"), INDEX)
  writeFileSync(join(webDir, "assets", "index-AbC123.js"), "console.log('workbench')\n")
  writeFileSync(join(webDir, "secret.txt"), "not an asset\n")
  open = await startGateway({ webDir })
  keyed = await startGateway({ webDir, apiKeys: [{ key: KEY, tenant: "acme" }] })
})
afterAll(async () => {
  await open.close()
  await keyed.close()
  rmSync(webDir, { recursive: true, force: true })
})

describe("the workbench page", () => {
  it("is index.html at / and at the page's routes, never cached, with a content security policy", async () => {
    for (const path of ["/", "/aggregate", "/memory", "/sessions/code-agent-auth/chat"]) {
      const r = await call(open, "GET", path)
      expect([path, r.status, r.contentType]).toEqual([path, 200, "text/html; charset=utf-8"])
      expect(r.text).toBe(INDEX)
    }
    const response = await fetch(`${open.baseUrl}/`)
    expect(response.headers.get("cache-control")).toBe("no-cache")
    expect(response.headers.get("content-security-policy")).toContain("script-src 'self'")
  })

  it("serves its assets by name, cached for good; nothing else of the folder", async () => {
    const asset = await fetch(`${open.baseUrl}/assets/index-AbC123.js`)
    expect(asset.status).toBe(200)
    expect(asset.headers.get("content-type")).toBe("text/javascript; charset=utf-8")
    expect(asset.headers.get("cache-control")).toContain("immutable")
    expect(await asset.text()).toBe("console.log('workbench')\n")
    for (const path of [
      "/assets/missing-1.js",
      "/assets/..%2Fsecret.txt",
      "/assets/%2e%2e/secret.txt",
      "/assets/%E0%A4%A.js",
      "/secret.txt"
    ]) {
      const r = await call(open, "GET", path)
      expect([path, r.status]).toEqual([path, 404])
      expect(r.json.error.tag).toBe("RouteNotFound")
    }
  })

  it("leaves the API's own 404s as they were: /api in the gateway's shape, /v1 in OpenAI's", async () => {
    const api = await call(open, "GET", "/api/nope")
    expect(api.status).toBe(404)
    expect(api.json.error).toMatchObject({ tag: "RouteNotFound" })
    const v1 = await call(open, "GET", "/v1/nope")
    expect(v1.status).toBe(404)
    expect(v1.json.error).toMatchObject({ type: "invalid_request_error" })
  })

  it("is public with API keys configured, while every API call the page makes needs a key", async () => {
    expect((await call(keyed, "GET", "/")).status).toBe(200)
    expect((await call(keyed, "GET", "/sessions/x/context")).status).toBe(200)
    expect((await call(keyed, "GET", "/assets/index-AbC123.js")).status).toBe(200)
    const refused = await call(keyed, "GET", "/api/sessions")
    expect(refused.status).toBe(401)
    expect(refused.json.error.tag).toBe("Unauthorized")
    const allowed = await call(keyed, "GET", "/api/sessions", undefined, { authorization: `Bearer ${KEY}` })
    expect(allowed.status).toBe(200)
    // An unknown path is still a tenant's route: no key, no 404 to probe with.
    expect((await call(keyed, "GET", "/whatever")).status).toBe(401)
  })

  it("answers 503 naming how to build it when the folder has no page", async () => {
    const empty = mkdtempSync(join(tmpdir(), "ctxo-web-empty-"))
    const gw = await startGateway({ webDir: empty })
    try {
      const r = await call(gw, "GET", "/")
      expect(r.status).toBe(503)
      expect(r.text).toContain("pnpm --filter @ctxo/web build")
    } finally {
      await gw.close()
      rmSync(empty, { recursive: true, force: true })
    }
  })
})

describe("the chat stream's parts", () => {
  it("ends with done carrying the parts the stream carried, as a client accumulates them", async () => {
    open.upstream.script(
      { type: "tool_calls", calls: [{ id: "r1", name: "read_file", arguments: { path: "milestones.md" } }] },
      { type: "text", text: "The milestones are listed; the fix is next." }
    )
    const turn = await open.run(chatEvents("code-agent-auth", { message: "What is left?", model: "gpt-4o" }))
    const done = turn.events.at(-1)!
    expect(done.event).toBe("done")
    const client = createPartAccumulator()
    for (const e of turn.events) pushChatEvent(client, e.data)
    const parts = (done.data as { parts: unknown }).parts
    expect(parts).toEqual(client.getParts())
    expect((parts as Array<{ _tag: string }>).map((p) => p._tag)).toEqual([
      "tool-call",
      "tool-result",
      "text"
    ])
  })
})
