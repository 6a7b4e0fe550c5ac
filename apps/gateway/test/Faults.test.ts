/**
 * Upstream faults on every client path (the SSE chat, `/v1/chat/completions` with a session and as
 * a proxy, streaming or not): a clear error within the deadline, the upstream request aborted, the
 * session usable right after, the input recorded once and no empty answer recorded. Then clients
 * that go away mid-answer, and a model-given pattern that would take exponential time.
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import type { Reply } from "@ctxo/agent/FakeUpstream"
import type { HistoryDocument } from "@ctxo/history/Message"
import { ABANDONED_ANSWER } from "@ctxo/history/Turns"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { chatEvents, createSession, historyText, startGateway } from "./harness.ts"

type Gateway = Awaited<ReturnType<typeof startGateway>>

const deadlines = { upstreamTimeoutMs: 2_000, upstreamFirstByteMs: 500, upstreamIdleMs: 500 }
/** The total deadline, with room for a loaded machine. */
const WITHIN_DEADLINE = deadlines.upstreamTimeoutMs + 3_000

interface Fault {
  readonly name: string
  readonly reply: Reply
  /** What the error says. */
  readonly says: RegExp
  readonly kind: "timeout" | "other"
  /** A whole JSON answer is fine when no stream was asked for. */
  readonly streamingOnly?: boolean
}

const faults: ReadonlyArray<Fault> = [
  {
    name: "a stall after the headers",
    reply: { type: "stall", after: "headers" },
    says: /no first byte/,
    kind: "timeout"
  },
  {
    name: "a stall after one chunk",
    reply: { type: "stall", after: "chunk" },
    says: /no data from the upstream for 500 ms/,
    kind: "timeout"
  },
  {
    name: "an empty 200",
    reply: { type: "empty" },
    says: /empty body|without a finish reason/,
    kind: "other"
  },
  {
    name: "a 200 that is not Server-Sent Events",
    reply: { type: "not-sse", text: "Plain JSON." },
    says: /without a finish reason, content or tool call \(content-type application\/json\)/,
    kind: "other",
    streamingOnly: true
  },
  { name: "malformed JSON", reply: { type: "malformed" }, says: /malformed JSON/, kind: "other" },
  {
    name: "a 429 with Retry-After",
    reply: { type: "error", status: 429, retryAfter: "7", message: "slow down" },
    says: /slow down/,
    kind: "other"
  },
  {
    name: "a 503",
    reply: { type: "error", status: 503, message: "overloaded" },
    says: /overloaded/,
    kind: "other"
  },
  { name: "a broken stream", reply: { type: "break", text: "half an answ" }, says: /./, kind: "other" }
]

const history = (gw: Gateway, sid: string) => JSON.parse(historyText(gw.dataDir, sid)) as HistoryDocument
const textOf = (m: HistoryDocument["messages"][number]) =>
  m.parts.map((p) => (p._tag === "text" ? p.text : "")).join("")
/** The session's record of one input: how often it was recorded, and the answers of its turn. */
const recorded = (gw: Gateway, sid: string, input: string) => {
  const doc = history(gw, sid)
  const inputs = doc.messages.filter((m) => m.meta.kind === "input" && textOf(m) === input)
  const turn = inputs[0]?.meta.turn
  return {
    inputs: inputs.length,
    answers: doc.messages.filter((m) => m.meta.turn === turn && m.meta.kind === "final").map(textOf),
    emptyAnswers: doc.messages.filter((m) => m.meta.kind === "final" && textOf(m) === "").length
  }
}

let sessions = 0
const newSession = (gw: Gateway) => createSession(gw, `faults-${++sessions}`)

/** Waits (generously) until `check` holds. */
const eventually = async (check: () => boolean, what: string) => {
  const until = Date.now() + 10_000
  while (!check()) {
    if (Date.now() > until) throw new Error(`never: ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** The upstream request of a failed call is closed, not left open. */
const upstreamClosed = (gw: Gateway) =>
  eventually(() => gw.upstream.inFlight() === 0, "upstream request closed")

const timed = async <A>(run: () => Promise<A>) => {
  const started = Date.now()
  const value = await run()
  return { value, ms: Date.now() - started }
}

/** A call through the openai SDK that must fail: its error. */
const failure = async (run: () => Promise<unknown>) => {
  try {
    await run()
  } catch (e) {
    return e as Error & { status?: number }
  }
  throw new Error("the call succeeded")
}

const user = (content: string) => ({
  model: "gpt-4o",
  messages: [{ role: "user" as const, content }]
})

describe("upstream faults", () => {
  let gw: Gateway
  let client: OpenAI
  beforeAll(async () => {
    gw = await startGateway(deadlines)
    client = new OpenAI({ apiKey: "unused", baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
  })
  afterAll(() => gw.close())

  describe.each(faults)("$name", (fault) => {
    it("SSE chat: an error event in time; a retry of the same key runs the model and answers", async () => {
      const sid = await newSession(gw)
      const input = `chat question about ${fault.name}`
      gw.upstream.script(fault.reply)
      const { value: failed, ms } = await timed(() =>
        gw.run(chatEvents(sid, { message: input, idempotencyKey: `key-${sid}` }))
      )
      expect(ms).toBeLessThan(WITHIN_DEADLINE)
      expect(failed.events.at(-1)?.data).toMatchObject({ type: "error", tag: "UpstreamError" })
      expect(failed.events.at(-1)?.data).toMatchObject({ message: expect.stringMatching(fault.says) })
      if (fault.reply.type === "error" && fault.reply.retryAfter !== undefined)
        expect(failed.events.at(-1)?.data).toMatchObject({
          message: expect.stringContaining(`retry after ${fault.reply.retryAfter}`)
        })
      await upstreamClosed(gw)
      expect(recorded(gw, sid, input)).toEqual({ inputs: 1, answers: [], emptyAnswers: 0 })

      gw.upstream.script({ type: "text", text: "The answer after the fault." })
      const calls = gw.upstream.requests.length
      const retried = await gw.run(chatEvents(sid, { message: input, idempotencyKey: `key-${sid}` }))
      expect(retried.events.at(-1)?.data).toMatchObject({ type: "done", text: "The answer after the fault." })
      expect(gw.upstream.requests.length).toBe(calls + 1)
      expect(recorded(gw, sid, input)).toEqual({
        inputs: 1,
        answers: ["The answer after the fault."],
        emptyAnswers: 0
      })
    }, 20_000)

    it.each([false, true])(
      "/v1 with a session (streaming %s): an error in time; the same request again answers",
      async (stream) => {
        if (fault.streamingOnly && !stream) return
        const sid = await newSession(gw)
        const input = `v1 question about ${fault.name}, streaming ${stream}`
        const options = { headers: { "X-Ctxo-Session": sid, "Idempotency-Key": `key-${sid}` } }
        gw.upstream.script(fault.reply)
        const { value: error, ms } = await timed(() =>
          failure(async () => {
            if (!stream) return client.chat.completions.create(user(input), options)
            for await (const _ of await client.chat.completions.create(
              { ...user(input), stream: true },
              options
            )) {
              // read to the end
            }
          })
        )
        expect(ms).toBeLessThan(WITHIN_DEADLINE)
        expect(error).toBeInstanceOf(OpenAI.APIError)
        expect(error.message).toMatch(fault.says)
        // A timeout is 504, any other upstream failure 502 (a 429 may be passed on as one).
        if (!stream)
          expect(
            fault.kind === "timeout"
              ? [504]
              : fault.reply.type === "error" && fault.reply.status === 429
                ? [429, 502]
                : [502]
          ).toContain(error.status)
        await upstreamClosed(gw)
        expect(recorded(gw, sid, input)).toEqual({ inputs: 1, answers: [], emptyAnswers: 0 })

        gw.upstream.script({ type: "text", text: "The answer after the fault." })
        const calls = gw.upstream.requests.length
        let text = ""
        if (!stream)
          text =
            (await client.chat.completions.create(user(input), options)).choices[0]?.message.content ?? ""
        else
          for await (const chunk of await client.chat.completions.create(
            { ...user(input), stream: true },
            options
          ))
            text += chunk.choices[0]?.delta.content ?? ""
        expect(text).toBe("The answer after the fault.")
        expect(gw.upstream.requests.length).toBe(calls + 1)
        expect(recorded(gw, sid, input)).toEqual({
          inputs: 1,
          answers: ["The answer after the fault."],
          emptyAnswers: 0
        })
      },
      20_000
    )

    it.each([false, true])(
      "/v1 as a proxy (streaming %s): an error in time; the next request answers",
      async (stream) => {
        if (fault.streamingOnly && !stream) return
        gw.upstream.script(fault.reply)
        const { value: error, ms } = await timed(() =>
          failure(async () => {
            if (!stream) return client.chat.completions.create(user("proxied"))
            for await (const _ of await client.chat.completions.create({
              ...user("proxied"),
              stream: true
            })) {
              // read to the end
            }
          })
        )
        expect(ms).toBeLessThan(WITHIN_DEADLINE)
        expect(error).toBeInstanceOf(OpenAI.APIError)
        expect(error.message).toMatch(fault.says)
        await upstreamClosed(gw)
        gw.upstream.script({ type: "text", text: "Proxied answer." })
        const answer = await client.chat.completions.create(user("proxied again"))
        expect(answer.choices[0]?.message.content).toBe("Proxied answer.")
      },
      20_000
    )
  })
})

describe("a client that goes away", () => {
  // Deadlines far away: only the disconnect can end the upstream call and free the session.
  let gw: Gateway
  let client: OpenAI
  beforeAll(async () => {
    gw = await startGateway({
      upstreamTimeoutMs: 120_000,
      upstreamFirstByteMs: 60_000,
      upstreamIdleMs: 60_000
    })
    client = new OpenAI({ apiKey: "unused", baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
  })
  afterAll(() => gw.close())

  /** After the disconnect: the upstream call is aborted and the session answers the next message. */
  const sessionAnswersNext = async (sid: string, abandoned: string) => {
    await upstreamClosed(gw)
    gw.upstream.script({ type: "text", text: "Here again." })
    const next = await gw.run(chatEvents(sid, { message: "Are you there?" }))
    expect(next.events.at(-1)?.data).toMatchObject({ type: "done", text: "Here again." })
    // No partial answer of the cut call: the turn was finished as abandoned when the next began.
    expect(recorded(gw, sid, abandoned)).toEqual({ inputs: 1, answers: [ABANDONED_ANSWER], emptyAnswers: 0 })
  }

  it("from the SSE chat: the turn's upstream call is aborted and the session lock released", async () => {
    const sid = await newSession(gw)
    gw.upstream.script({ type: "stall", after: "chunk" })
    const controller = new AbortController()
    const response = await fetch(`${gw.baseUrl}/api/session/${sid}/chat`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ message: "Tell me everything." }),
      signal: controller.signal
    })
    const reader = response.body!.getReader()
    let seen = ""
    while (!seen.includes("event: text-delta")) {
      const { value } = await reader.read()
      seen += new TextDecoder().decode(value)
    }
    controller.abort()
    await sessionAnswersNext(sid, "Tell me everything.")
  }, 20_000)

  it("from a streaming /v1 completion with a session", async () => {
    const sid = await newSession(gw)
    gw.upstream.script({ type: "stall", after: "chunk" })
    const controller = new AbortController()
    const stream = await client.chat.completions.create(
      { ...user("Stream me everything."), stream: true },
      { headers: { "X-Ctxo-Session": sid }, signal: controller.signal }
    )
    for await (const chunk of stream) if (chunk.choices[0]?.delta.content) break
    await sessionAnswersNext(sid, "Stream me everything.")
  }, 20_000)

  it("from a streaming /v1 completion without a session (proxy)", async () => {
    gw.upstream.script({ type: "stall", after: "chunk" })
    const controller = new AbortController()
    const stream = await client.chat.completions.create(
      { ...user("Proxy me everything."), stream: true },
      { signal: controller.signal }
    )
    for await (const chunk of stream) if (chunk.choices[0]?.delta.content) break
    await upstreamClosed(gw)
    gw.upstream.script({ type: "text", text: "Proxied again." })
    const answer = await client.chat.completions.create(user("Still there?"))
    expect(answer.choices[0]?.message.content).toBe("Proxied again.")
  }, 20_000)

  it("from a /v1 completion without a session (proxy), while the upstream has not answered", async () => {
    gw.upstream.script({ type: "hang" })
    const calls = gw.upstream.requests.length
    const controller = new AbortController()
    const pending = client.chat.completions
      .create(user("Proxy me slowly."), { signal: controller.signal })
      .catch((e: unknown) => e)
    await eventually(() => gw.upstream.requests.length > calls, "the upstream got the request")
    controller.abort()
    expect(await pending).toBeInstanceOf(OpenAI.APIUserAbortError)
    await upstreamClosed(gw)
    gw.upstream.script({ type: "text", text: "Proxied again." })
    const answer = await client.chat.completions.create(user("Still there?"))
    expect(answer.choices[0]?.message.content).toBe("Proxied again.")
  }, 20_000)

  it("from a /v1 completion with a session, while the upstream has not answered", async () => {
    const sid = await newSession(gw)
    gw.upstream.script({ type: "hang" })
    const calls = gw.upstream.requests.length
    const controller = new AbortController()
    const pending = client.chat.completions
      .create(user("Answer slowly."), { headers: { "X-Ctxo-Session": sid }, signal: controller.signal })
      .catch((e: unknown) => e)
    await eventually(() => gw.upstream.requests.length > calls, "the upstream got the request")
    controller.abort()
    expect(await pending).toBeInstanceOf(OpenAI.APIUserAbortError)
    await sessionAnswersNext(sid, "Answer slowly.")
  }, 20_000)
})

describe("the search tool", () => {
  let gw: Gateway
  beforeAll(async () => {
    gw = await startGateway()
  })
  afterAll(() => gw.close())

  it("runs a catastrophic pattern in linear time, and other requests are served meanwhile", async () => {
    const sid = await newSession(gw)
    // `(a+)+$` over this line takes a backtracking engine longer than the universe has.
    writeFileSync(join(gw.dataDir, sid, "long-line.txt"), `${"a".repeat(50_000)}!\n`)
    gw.upstream.script(
      { type: "tool_calls", calls: [{ id: "s1", name: "search", arguments: { pattern: "(a+)+$" } }] },
      { type: "tool_calls", calls: [{ id: "s2", name: "search", arguments: { pattern: "(?<=a)!" } }] },
      { type: "text", text: "Searched." }
    )
    const turn = gw.run(chatEvents(sid, { message: "Search for runs of a." }))
    const other = await timed(() => fetch(`${gw.baseUrl}/api/sessions`).then((r) => r.status))
    expect(other.value).toBe(200)
    const { value: result, ms } = await timed(() => turn)
    expect(ms).toBeLessThan(10_000)
    const results = result.events.flatMap((e) => (e.data.type === "tool-result" ? [e.data.result] : []))
    expect(results[0]).toMatchObject({ status: "success", data: { totalMatches: 0 } })
    expect(results[1]).toMatchObject({
      status: "error",
      error: { code: "BAD_ARGUMENTS", message: expect.stringMatching(/backreferences or lookaround/) }
    })
    expect(result.events.at(-1)?.data).toMatchObject({ type: "done", text: "Searched." })
  }, 20_000)
})
