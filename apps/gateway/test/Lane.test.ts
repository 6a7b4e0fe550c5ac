/**
 * The lane: `POST /v1/chat/completions` as clients spell it is served on plain node:http ahead of
 * the Effect app; every other spelling the router takes (a trailing slash, `//`, upper case) goes
 * through the HttpApi route. Both run the same answer, so a client sees no difference: the same
 * status, headers and body, for proxy and session requests, streamed or not, and for errors.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createSession, startGateway } from "./harness.ts"

type Gateway = Awaited<ReturnType<typeof startGateway>>

const LANE = "/v1/chat/completions"
const OTHERS = ["/v1/chat/completions/", "//v1/chat/completions", "/V1/Chat/Completions"]

/** What a client sees of an answer, with what differs per call (ids, times) made equal. */
const seen = async (response: Response) => {
  const normalize = (text: string) =>
    text
      .replace(/"id":"[^"]*"/g, '"id":"<id>"')
      .replace(/"created":\d+/g, '"created":0')
      .replace(/ctxo-replayed-[a-z0-9]+/g, "<replayed>")
  const headers = Object.fromEntries(
    [...response.headers].filter(
      ([name]) => name.startsWith("x-ctxo-") || name === "content-type" || name === "retry-after"
    )
  )
  return {
    status: response.status,
    headers,
    requestId: response.headers.get("x-request-id") !== null,
    body: normalize(await response.text())
  }
}

describe("the lane and the router's other spellings of /v1/chat/completions", () => {
  let gw: Gateway
  beforeAll(async () => {
    gw = await startGateway()
  })
  afterAll(() => gw.close())

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${gw.baseUrl}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body)
    })

  const requests: ReadonlyArray<{
    readonly name: string
    readonly body: unknown
    readonly headers?: Record<string, string>
    readonly session?: boolean
  }> = [
    {
      name: "a proxied completion",
      body: { model: "gpt-4o", messages: [{ role: "user", content: "Hello there." }] }
    },
    {
      name: "a proxied stream",
      body: { model: "gpt-4o", stream: true, messages: [{ role: "user", content: "Stream it." }] }
    },
    {
      name: "a session's completion that records nothing",
      body: { model: "gpt-4o", messages: [{ role: "user", content: "What is in the notes?" }] },
      headers: { "x-ctxo-record": "false" },
      session: true
    },
    {
      name: "a session's stream that records nothing",
      body: { model: "gpt-4o", stream: true, messages: [{ role: "user", content: "Stream the notes." }] },
      headers: { "x-ctxo-record": "false" },
      session: true
    },
    {
      name: "an unknown model",
      body: { model: "no-such-model", messages: [{ role: "user", content: "Hi" }] }
    },
    { name: "a malformed message", body: { model: "gpt-4o", messages: [{ role: "user" }] } },
    { name: "a body that is not JSON", body: "{ not json" },
    {
      name: "a session with no user message",
      body: { model: "gpt-4o", messages: [{ role: "system", content: "Be brief." }] },
      session: true
    },
    {
      name: "a session that does not exist",
      body: { model: "gpt-4o", messages: [{ role: "user", content: "Hi" }] },
      headers: { "x-ctxo-session": "no-such-session" }
    }
  ]

  for (const r of requests)
    it(`answers ${r.name} the same way`, async () => {
      const session =
        r.session === true ? { "x-ctxo-session": await createSession(gw, `lane-${Date.now()}`) } : {}
      const headers = { ...session, ...r.headers }
      const expected = await seen(await post(LANE, r.body, headers))
      expect(expected.requestId).toBe(true)
      for (const path of OTHERS) expect(await seen(await post(path, r.body, headers)), path).toEqual(expected)
    })

  it("records a session turn once whichever spelling sends it", async () => {
    const sid = await createSession(gw, "lane-turns")
    const body = { model: "gpt-4o", messages: [{ role: "user", content: "Record me." }] }
    const first = await post(LANE, body, { "x-ctxo-session": sid, "idempotency-key": "lane-1" })
    expect(first.status).toBe(200)
    const again = await post(OTHERS[0]!, body, { "x-ctxo-session": sid, "idempotency-key": "lane-1" })
    expect(again.status).toBe(200)
    expect(again.headers.get("x-ctxo-turn")).toBe(first.headers.get("x-ctxo-turn"))
    const text = (await again.json()) as { choices: Array<{ message: { content: string } }> }
    expect(text.choices[0]?.message.content).toBe(
      ((await first.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]?.message
        .content
    )
  })
})
