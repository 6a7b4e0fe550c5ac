/**
 * The turn engine as a user meets it through the gateway: every turn (the SSE chat and
 * `/v1/chat/completions` in session mode) holds the session for its whole length, streaming
 * included; an input is recorded once; an input that cannot fit is refused before anything is
 * archived; the model sees this turn's references, reminders and full tool results; history in
 * the seed's plain-array form is read; a corrupt manifest is named; a deleted session stays gone.
 */
import { rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import { encodeSidecar, syncBlockIds } from "@ctxo/blocks/BlockIds"
import { parseMarkdownBlocks } from "@ctxo/blocks/MarkdownBlocks"
import type { HistoryDocument } from "@ctxo/history/Message"
import { Option } from "effect"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { chatEvents, createSession, hasHistory, historyText, startGateway } from "./harness.ts"

type Gateway = Awaited<ReturnType<typeof startGateway>>
type Sent = ReadonlyArray<Record<string, unknown>>

let gw: Gateway
let client: OpenAI
beforeAll(async () => {
  gw = await startGateway()
  client = new OpenAI({ apiKey: "unused", baseURL: `${gw.baseUrl}/v1`, maxRetries: 0, timeout: 60_000 })
})
afterAll(async () => {
  await gw?.close()
  if (gw !== undefined) rmSync(gw.dataDir, { recursive: true, force: true })
})

// --- helpers

/** What the tests read of a JSON answer: an error (either shape) or a preview's request. */
interface Json {
  readonly error?: {
    readonly message: string
    readonly type?: string
    readonly code?: string | null
    readonly param?: unknown
  }
  readonly request?: { readonly messages: ReadonlyArray<Record<string, unknown>> }
}

interface Reply {
  readonly status: number
  readonly json: Json | undefined
  readonly text: string
}

const http = async (
  g: Gateway,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {}
) => {
  const response = await fetch(`${g.baseUrl}${path}`, {
    method,
    headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  let json: Json | undefined
  try {
    json = JSON.parse(text) as Json
  } catch {
    json = undefined
  }
  return { status: response.status, json, text } satisfies Reply
}

const writeFile = async (g: Gateway, id: string, path: string, content: string) => {
  const r = await http(g, "PUT", `/api/sessions/${id}/file?path=${encodeURIComponent(path)}`, { content })
  expect(r.status, r.text).toBe(200)
}
const preview = (g: Gateway, id: string, query?: string) =>
  http(
    g,
    "GET",
    `/api/session/${id}/context-preview${query === undefined ? "" : `?query=${encodeURIComponent(query)}`}`
  )

const historyOf = (g: Gateway, id: string) => historyText(g.dataDir, id)
const history = (g: Gateway, id: string) => JSON.parse(historyOf(g, id)) as HistoryDocument
const textOf = (m: HistoryDocument["messages"][number]) =>
  m.parts.map((p) => (p._tag === "text" ? p.text : "")).join("")
const contentOf = (m: Record<string, unknown>) =>
  typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? "")

/** A streaming session-mode completion read to its end, as the official SDK gives it. */
const streamed = async (sessionId: string, content: string, headers: Record<string, string> = {}) => {
  const stream = await client.chat.completions.create(
    { model: "gpt-4o", stream: true, messages: [{ role: "user", content }] },
    { headers: { "X-Ctxo-Session": sessionId, ...headers } }
  )
  let text = ""
  for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ""
  return text
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

// --- the tests

describe("one turn at a time on /v1 session mode, streaming included", () => {
  it("50 concurrent streaming requests on one session serialize whole turns", async () => {
    const sid = "engine-fifty"
    await createSession(gw, sid)
    const before = gw.upstream.requests.length
    const inputs = Array.from({ length: 50 }, (_, i) => `stream message ${i}`)
    const answers = await Promise.all(inputs.map((m) => streamed(sid, m)))
    // Every client got the answer to its own message.
    for (const [i, answer] of answers.entries()) expect(answer).toContain(`You said: stream message ${i}`)

    const doc = history(gw, sid)
    // Each turn is its input then its answer, turns in order, every turn finished.
    expect(doc.messages.map((m) => `${m.meta.turn}:${m.role}:${m.meta.kind}`)).toEqual(
      Array.from({ length: 50 }, (_, i) => [`${i + 1}:user:input`, `${i + 1}:assistant:final`]).flat()
    )
    const recordedInputs = doc.messages.filter((m) => m.meta.kind === "input").map(textOf)
    const recordedAnswers = doc.messages.filter((m) => m.meta.kind === "final").map(textOf)
    expect([...recordedInputs].sort()).toEqual([...inputs].sort())
    // The answer recorded for an input is the one its client got.
    for (const [k, input] of recordedInputs.entries())
      expect(recordedAnswers[k]).toBe(answers[inputs.indexOf(input)])

    // The k-th upstream request carries the k-1 recorded turns and exactly one new input.
    const sent = gw.upstream.requests.slice(before)
    expect(sent).toHaveLength(50)
    for (const [k, request] of sent.entries()) {
      const users = request.body.messages
        .filter((m) => m.role === "user")
        .flatMap((m) => contentOf(m).match(/stream message \d+/g) ?? [])
      expect(users, `upstream request ${k + 1}`).toEqual(recordedInputs.slice(0, k + 1))
      const assistants = request.body.messages.filter((m) => m.role === "assistant").map(contentOf)
      expect(assistants, `upstream request ${k + 1}`).toEqual(recordedAnswers.slice(0, k))
    }
  }, 120_000)

  it("20 identical concurrent streams with one Idempotency-Key: one turn, one upstream call, every client answered", async () => {
    const sid = "engine-idem"
    await createSession(gw, sid)
    gw.upstream.script({ type: "text", text: "The one and only answer, streamed in pieces." })
    const before = gw.upstream.requests.length
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => streamed(sid, "Tell me once.", { "Idempotency-Key": "same-key" }))
    )
    expect(answers).toEqual(Array.from({ length: 20 }, () => "The one and only answer, streamed in pieces."))
    expect(gw.upstream.requests.length - before).toBe(1)
    const doc = history(gw, sid)
    expect(doc.messages.map((m) => `${m.meta.turn}:${m.role}:${m.meta.kind}`)).toEqual([
      "1:user:input",
      "1:assistant:final"
    ])
    expect(doc.messages[0]?.meta.inputKey).toBe("same-key")
    expect(textOf(doc.messages[1]!)).toBe("The one and only answer, streamed in pieces.")
  }, 60_000)

  it("the same Idempotency-Key with another message is 409 in OpenAI's error shape, nothing recorded", async () => {
    const sid = "engine-idem"
    const recorded = historyOf(gw, sid)
    const calls = gw.upstream.requests.length
    const body = { model: "gpt-4o", messages: [{ role: "user", content: "Something else entirely." }] }
    const headers = { "X-Ctxo-Session": sid, "Idempotency-Key": "same-key" }
    const plain = await http(gw, "POST", "/v1/chat/completions", body, headers)
    expect(plain.status).toBe(409)
    expect(plain.json).toEqual({
      error: { message: expect.any(String), type: expect.any(String), code: expect.any(String), param: null }
    })
    expect(plain.json?.error?.message).toMatch(/key/i)
    // Through the SDK, streaming or not, the client sees a 409 (never a 200 with an error inside).
    const viaSdk = await client.chat.completions
      .create(
        { model: "gpt-4o", messages: [{ role: "user", content: "Something else entirely." }] },
        { headers }
      )
      .catch((e: unknown) => e)
    expect(viaSdk).toBeInstanceOf(OpenAI.ConflictError)
    const streaming = await http(gw, "POST", "/v1/chat/completions", { ...body, stream: true }, headers)
    expect(streaming.status, streaming.text).toBe(409)
    expect(streaming.json?.error?.code).toBe(plain.json?.error?.code)
    expect(historyOf(gw, sid)).toBe(recorded)
    expect(gw.upstream.requests.length).toBe(calls)
  })
})

describe("an input that cannot fit", () => {
  it("is refused on the SSE chat and on /v1 with nothing archived and no turn recorded", async () => {
    const sid = "engine-oversized"
    await createSession(gw, sid)
    // Earlier turns that a compaction would archive.
    for (const message of ["first question", "second question", "third question"]) {
      const r = await gw.run(chatEvents(sid, { message, model: "gpt-4o" }))
      expect(r.events.at(-1)?.event).toBe("done")
    }
    const recorded = historyOf(gw, sid)
    const calls = gw.upstream.requests.length
    // ~900 KB, about 180k tokens: over gpt-4o's 128k window.
    const huge = "alpha beta gamma delta ".repeat(40_000)
    expect(huge.length).toBeGreaterThan(900_000)

    const sse = await gw.run(chatEvents(sid, { message: huge, model: "gpt-4o" }))
    expect(sse.status).toBe(200)
    expect(sse.events.at(-1)?.event).toBe("error")
    expect(sse.events.map((e) => e.event)).not.toContain("compaction-started")
    expect(sse.events.at(-1)?.data).toMatchObject({
      type: "error",
      tag: "BudgetExceeded",
      message: expect.stringMatching(/does not fit/)
    })

    const v1 = await http(
      gw,
      "POST",
      "/v1/chat/completions",
      { model: "gpt-4o", messages: [{ role: "user", content: huge }] },
      { "X-Ctxo-Session": sid }
    )
    expect(v1.status).toBe(400)
    expect(v1.json?.error?.code).toBe("context_length_exceeded")
    expect(v1.json?.error?.message).toMatch(/does not fit/)
    const v1Stream = await http(
      gw,
      "POST",
      "/v1/chat/completions",
      { model: "gpt-4o", stream: true, messages: [{ role: "user", content: huge }] },
      { "X-Ctxo-Session": sid }
    )
    expect(v1Stream.status).toBe(400)
    expect(v1Stream.json?.error?.code).toBe("context_length_exceeded")

    // Nothing archived, no summary, no turn: the history is byte for byte what it was.
    const doc = history(gw, sid)
    expect(doc.messages.filter((m) => m.meta.archivedBy !== undefined)).toEqual([])
    expect(doc.compression).toEqual([])
    expect(historyOf(gw, sid)).toBe(recorded)
    expect(gw.upstream.requests.length).toBe(calls)
    expect((await preview(gw, sid)).status).toBe(200)
    const next = await gw.run(chatEvents(sid, { message: "a normal question", model: "gpt-4o" }))
    expect(next.events.at(-1)).toMatchObject({ event: "done" })
    expect(next.events[0]).toMatchObject({ event: "turn", data: { turn: 4, resumed: false } })
  }, 60_000)
})

describe("what the model sees in a running turn", () => {
  it("a chat's references, inline blocks and @file reminders reach the model; its first request equals the preview", async () => {
    const sid = "engine-refs"
    await createSession(gw, sid)
    const config = await http(gw, "PUT", `/api/sessions/${sid}/config`, { model: "gpt-4o" })
    expect(config.status, config.text).toBe(200)
    await writeFile(gw, sid, "notes.md", "first note line\nsecond note line\nthird note line\n")
    await writeFile(gw, sid, "guide.md", "# Intro\nWelcome.\n\n# Setup\nRun pnpm install before the tests.\n")
    await writeFile(gw, sid, "todo.txt", "- ship it\n")
    const message = "Compare [guide.md#Setup] with my notes, and check @todo.txt please."

    // The same input, previewed before the turn, is exactly what goes upstream.
    const shown = await preview(gw, sid, message)
    expect(shown.status, shown.text).toBe(200)
    const calls = gw.upstream.requests.length
    const first = await gw.run(chatEvents(sid, { message }))
    expect(first.events.at(-1)?.event).toBe("done")
    const firstSent = gw.upstream.requests[calls]!.body.messages
    expect(firstSent).toEqual(shown.json?.request?.messages)
    const firstLast = firstSent.filter((m) => m.role === "user").at(-1)!
    expect(contentOf(firstLast)).toContain("Run pnpm install before the tests.")
    expect(contentOf(firstLast)).toContain("<system-reminder>")
    expect(contentOf(firstLast)).toContain("@todo.txt")

    // With explicit references too.
    const before = gw.upstream.requests.length
    const second = await gw.run(
      chatEvents(sid, {
        message: "And now [guide.md#Setup] again, with @todo.txt.",
        references: ["[notes.md:1:2]"]
      })
    )
    expect(second.events.at(-1)?.event).toBe("done")
    const sent = gw.upstream.requests[before]!.body.messages as Sent
    const last = contentOf(sent.filter((m) => m.role === "user").at(-1)!)
    expect(last).toContain("first note line")
    expect(last).toContain("second note line")
    expect(last).not.toContain("third note line")
    expect(last).toContain("Run pnpm install before the tests.")
    expect(last).toMatch(/<system-reminder>[\s\S]*@todo\.txt[\s\S]*<\/system-reminder>/)
  }, 60_000)

  it("sees a tool's full result in the running turn while history keeps the compressed form", async () => {
    const sid = "engine-full"
    await createSession(gw, sid)
    const lines = Array.from({ length: 600 }, (_, i) => `line ${String(i + 1).padStart(4, "0")} of big.txt`)
    await writeFile(gw, sid, "big.txt", `${lines.join("\n")}\n`)
    gw.upstream.script(
      { type: "tool_calls", calls: [{ id: "call_big", name: "read_file", arguments: { path: "big.txt" } }] },
      { type: "text", text: "It has 600 lines." }
    )
    const before = gw.upstream.requests.length
    const result = await gw.run(chatEvents(sid, { message: "How long is big.txt?", model: "gpt-4o" }))
    expect(result.events.at(-1)).toMatchObject({ event: "done", data: { text: "It has 600 lines." } })
    const sent = gw.upstream.requests.slice(before)
    expect(sent).toHaveLength(2)
    const tool = sent[1]!.body.messages.find((m) => m.role === "tool" && m.tool_call_id === "call_big")!
    const seen = contentOf(tool).match(/line \d{4} of big\.txt/g) ?? []
    expect(seen).toEqual(lines)

    const doc = history(gw, sid)
    const part = doc.messages
      .flatMap((m) => m.parts)
      .find((p) => p._tag === "tool-result" && p.callId === "call_big")
    expect(part).toBeDefined()
    const kept = JSON.stringify(part)
    const keptLines = kept.match(/line \d{4} of big\.txt/g) ?? []
    expect(keptLines.length).toBeGreaterThan(0)
    expect(keptLines.length).toBeLessThanOrEqual(500)
    expect(kept).toContain("readBack")
    // A later turn sees history's compressed form, not the full result.
    const next = gw.upstream.requests.length
    await gw.run(chatEvents(sid, { message: "Thanks.", model: "gpt-4o" }))
    const later = gw.upstream.requests[next]!.body.messages.find((m) => m.role === "tool")
    expect((contentOf(later!).match(/line \d{4} of big\.txt/g) ?? []).length).toBeLessThanOrEqual(500)
  }, 60_000)
})

describe("session files as users leave them", () => {
  for (const [label, seed] of [
    ["[]", []],
    [
      "[{ role, content }]",
      [
        { role: "user", content: "hi" },
        { role: "assistant", content: "hello" }
      ]
    ]
  ] as const)
    it(`reads messages.json in the plain-array form ${label} and writes v1 on the next turn, keeping it`, async () => {
      const sid = `engine-plain-${seed.length}`
      await createSession(gw, sid)
      writeFileSync(join(gw.dataDir, sid, "messages.json"), JSON.stringify(seed))
      const shown = await preview(gw, sid)
      expect(shown.status, shown.text).toBe(200)
      const shownText = JSON.stringify(shown.json?.request?.messages)
      for (const m of seed) expect(shownText).toContain(m.content)

      const result = await gw.run(chatEvents(sid, { message: "and now?", model: "gpt-4o" }))
      expect(result.events.at(-1)?.event, JSON.stringify(result.events.at(-1))).toBe("done")
      const doc = history(gw, sid)
      expect(doc.format).toBe("ctxo.history/v1")
      expect(doc.messages.map((m) => [m.role, textOf(m)])).toEqual([
        ...seed.map((m) => [m.role, m.content]),
        ["user", "and now?"],
        ["assistant", (result.events.at(-1)!.data as { text: string }).text]
      ])
      expect((await preview(gw, sid)).status).toBe(200)
    })

  it("a malformed messages.json is one sentence naming the file and the field, never the file's content", async () => {
    const sid = "engine-corrupt-history"
    await createSession(gw, sid)
    const secret = "s3cr3t-".repeat(40)
    writeFileSync(
      join(gw.dataDir, sid, "messages.json"),
      JSON.stringify([
        { role: "user", content: "hi" },
        { role: "bot", content: secret }
      ])
    )
    const shown = await preview(gw, sid, "hello?")
    expect(shown.status, shown.text).toBe(422)
    const message = shown.json?.error?.message ?? ""
    expect(message).toMatch(/messages\.json/)
    expect(message).toMatch(/\[1\]\.role: expected /)
    expect(message).not.toContain("s3cr3t")
    expect(message).not.toMatch(/Invalid manifest/)
    expect(message.length).toBeLessThanOrEqual(300)
  })

  it("a corrupt context-config.json is named (422, and in the chat's error) and repaired through the files API", async () => {
    const sid = "engine-corrupt"
    await createSession(gw, sid)
    await writeFile(gw, sid, "context-config.json", "{ not json")
    const config = await http(gw, "GET", `/api/sessions/${sid}/config`)
    expect(config.status, config.text).toBe(422)
    expect(config.json?.error?.message).toContain("context-config.json")
    const calls = gw.upstream.requests.length
    const chat = await gw.run(chatEvents(sid, { message: "hello?", model: "gpt-4o" }))
    expect(chat.events.at(-1)?.event).toBe("error")
    expect((chat.events.at(-1)!.data as { message: string }).message).toContain("context-config.json")
    const v1 = await http(
      gw,
      "POST",
      "/v1/chat/completions",
      { model: "gpt-4o", messages: [{ role: "user", content: "hello?" }] },
      { "X-Ctxo-Session": sid }
    )
    expect(v1.status).toBe(422)
    expect(v1.json?.error?.message).toContain("context-config.json")
    expect(gw.upstream.requests.length).toBe(calls)
    expect(hasHistory(gw.dataDir, sid)).toBe(false)

    await writeFile(gw, sid, "context-config.json", JSON.stringify({ policy: "layered", model: "gpt-4o" }))
    expect((await http(gw, "GET", `/api/sessions/${sid}/config`)).status).toBe(200)
    const again = await gw.run(chatEvents(sid, { message: "hello?" }))
    expect(again.events.at(-1)?.event).toBe("done")
  })
})

/**
 * An upstream in front of the fake one that holds back the answer to a request until the test
 * releases it: the old turn's answer then arrives after the session was deleted and made again.
 */
const startHoldingUpstream = async () => {
  let target = ""
  let held: Promise<void> | undefined
  let release = () => {}
  let arrived = 0
  const server = createServer(async (req, res) => {
    const chunks: Array<Buffer> = []
    for await (const c of req) chunks.push(c as Buffer)
    arrived++
    const gate = held
    held = undefined
    if (gate !== undefined) await gate
    const answer = await fetch(`${target}${req.url?.replace(/^\/v1/, "")}`, {
      method: req.method ?? "POST",
      headers: { "content-type": "application/json" },
      ...(req.method === "POST" ? { body: Buffer.concat(chunks) } : {})
    })
    res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json" })
    if (answer.body !== null) for await (const c of answer.body) res.write(c)
    res.end()
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    forwardTo: (url: string) => {
      target = url
    },
    /** The next request waits until `release()`. */
    holdNext: () => {
      held = new Promise<void>((resolve) => {
        release = resolve
      })
    },
    release: () => release(),
    /** Requests received so far (held ones included). */
    arrived: () => arrived,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

describe("deleting a session while its turn runs", () => {
  let slow: Gateway
  let holding: Awaited<ReturnType<typeof startHoldingUpstream>>
  beforeAll(async () => {
    holding = await startHoldingUpstream()
    slow = await startGateway({ upstreamBaseUrl: Option.some(holding.url) })
    holding.forwardTo(slow.upstream.url)
  })
  afterAll(async () => {
    await slow?.close()
    await holding?.close()
    if (slow !== undefined) rmSync(slow.dataDir, { recursive: true, force: true })
  })

  const shows = async (sid: string, ...texts: ReadonlyArray<string>) => {
    const shown = await preview(slow, sid)
    expect(shown.status, shown.text).toBe(200)
    const sent = JSON.stringify(shown.json?.request?.messages)
    return texts.filter((t) => sent.includes(t))
  }
  const recordedOf = (sid: string) => {
    return hasHistory(slow.dataDir, sid) ? history(slow, sid).messages.map(textOf) : []
  }

  it("the same id created again starts empty and stays empty after the old turn ends", async () => {
    const sid = "engine-deleted"
    const old = ["an earlier turn", "a turn that stalls", "The late answer of the old turn."]
    await createSession(slow, sid)
    const warm = await slow.run(chatEvents(sid, { message: old[0], model: "gpt-4o" }))
    expect(warm.events.at(-1)?.event).toBe("done")
    slow.upstream.script({ type: "text", text: old[2]! })
    holding.holdNext()
    const calls = slow.upstream.requests.length
    const arrived = holding.arrived()
    const running = slow.run(chatEvents(sid, { message: old[1], model: "gpt-4o" }))
    // The old turn's input is recorded and its model call is under way (held).
    while (holding.arrived() === arrived) await sleep(10)
    expect(recordedOf(sid)).toEqual([old[0], expect.any(String), old[1]])

    // A DELETE takes the session's lock, so it waits for the running turn; the new session made
    // after it starts empty and stays empty.
    let deleted = false
    const recreated = http(slow, "DELETE", `/api/sessions/${sid}`).then(async (answer) => {
      deleted = true
      expect(answer.status, answer.text).toBe(204)
      await createSession(slow, sid)
      expect(await shows(sid, ...old)).toEqual([])
      expect(recordedOf(sid)).toEqual([])
    })
    await sleep(300)
    expect(deleted).toBe(false)
    holding.release()
    await recreated
    await running
    expect(slow.upstream.requests.length).toBe(calls + 1)
    await sleep(100)
    expect(await shows(sid, ...old)).toEqual([])
    expect(recordedOf(sid)).toEqual([])
    const fresh = await slow.run(chatEvents(sid, { message: "a new beginning", model: "gpt-4o" }))
    expect(fresh.events[0]).toMatchObject({ event: "turn", data: { turn: 1, resumed: false } })
    expect(recordedOf(sid)).toEqual(["a new beginning", (fresh.events.at(-1)!.data as { text: string }).text])
  }, 30_000)
})

describe("the manifest's budget shares and short block ids, through the gateway", () => {
  const knowledge = "# Raft\nLeader election and log replication.\n\n# Paxos\nSingle-decree consensus.\n"
  const manifest = (shares?: Record<string, number>) =>
    JSON.stringify({
      policy: "notebook",
      model: "gpt-4o",
      knowledge: [{ path: "kb.md" }],
      ...(shares === undefined ? {} : { budget: { shares } })
    })

  it("a share of 0 takes that layer out of the preview and of what the model receives, and the report says why", async () => {
    const sid = "engine-shares"
    await createSession(gw, sid)
    await writeFile(gw, sid, "kb.md", knowledge)
    await writeFile(gw, sid, "context-config.json", manifest())
    const open = await preview(gw, sid, "Compare them.")
    expect(open.status, open.text).toBe(200)
    expect(open.text).toContain("Leader election")

    await writeFile(gw, sid, "context-config.json", manifest({ knowledge: 0 }))
    const off = await preview(gw, sid, "Compare them.")
    expect(off.status, off.text).toBe(200)
    expect(JSON.stringify(off.json?.request)).not.toContain("Leader election")
    const report = (
      off.json as { report?: { units: ReadonlyArray<{ source: string; status: string; reason?: string }> } }
    ).report
    expect(report?.units.filter((u) => u.source === "knowledge").map((u) => [u.status, u.reason])).toEqual([
      ["dropped", "knowledge has a share of 0 in the configured shares, so it gets no tokens"],
      ["dropped", "knowledge has a share of 0 in the configured shares, so it gets no tokens"]
    ])
    const before = gw.upstream.requests.length
    await client.chat.completions.create(
      { model: "gpt-4o", messages: [{ role: "user", content: "Compare them." }] },
      { headers: { "X-Ctxo-Session": sid } }
    )
    expect(gw.upstream.requests.length).toBe(before + 1)
    expect(JSON.stringify(gw.upstream.requests.at(-1)?.body)).not.toContain("Leader election")
  })

  it("a short id (^bN) from a file's sidecar resolves in a /v1 message and in the manifest's references", async () => {
    const sid = "engine-short-ids"
    await createSession(gw, sid)
    const notes = "# Plan\nShip the compiler.\n\n# Risks\nThe budget is tight.\n"
    const ids = syncBlockIds(parseMarkdownBlocks(notes, "notes.md"), undefined, "notes.md")
    const risks = `^${ids.sidecar.blocks.find((b) => b.path === "Risks")!.id}`
    await writeFile(gw, sid, "notes.md", notes)
    await writeFile(gw, sid, "notes.md.blocks.json", encodeSidecar(ids.sidecar))
    await writeFile(gw, sid, "context-config.json", JSON.stringify({ policy: "notebook", model: "gpt-4o" }))
    const before = gw.upstream.requests.length
    await client.chat.completions.create(
      { model: "gpt-4o", messages: [{ role: "user", content: `What worries us in [notes.md#${risks}]?` }] },
      { headers: { "X-Ctxo-Session": sid } }
    )
    expect(gw.upstream.requests.length).toBe(before + 1)
    expect(JSON.stringify(gw.upstream.requests.at(-1)?.body)).toContain("The budget is tight.")
    expect(JSON.stringify(gw.upstream.requests.at(-1)?.body)).not.toContain("Ship the compiler.")

    await writeFile(
      gw,
      sid,
      "context-config.json",
      JSON.stringify({
        policy: "notebook",
        model: "gpt-4o",
        query: "And now?",
        references: [{ path: "notes.md", block: risks }]
      })
    )
    const shown = await preview(gw, sid)
    expect(shown.status, shown.text).toBe(200)
    expect(JSON.stringify(shown.json?.request)).toContain("The budget is tight.")
  })
})

describe("/v1 session mode compacts like the chat", () => {
  it("archives the older turns into a summary when the reported usage reaches the trigger, and the next request carries it", async () => {
    const sid = "engine-v1-compacts"
    await createSession(gw, sid)
    const ask = (content: string) =>
      client.chat.completions.create(
        { model: "gpt-4o", messages: [{ role: "user", content }] },
        { headers: { "X-Ctxo-Session": sid } }
      )
    // The gateway's /metrics counts compactions (a Prometheus counter, summed over its series).
    const compactions = async () =>
      (await http(gw, "GET", "/metrics")).text
        .split("\n")
        .filter((line) => /^ctxo_compactions_total(\{| )/.test(line))
        .reduce((n, line) => n + Number(line.slice(line.lastIndexOf(" ") + 1)), 0)
    for (let i = 1; i <= 12; i++) await ask(`step ${i} of the long task`)
    const before = await compactions()
    // The provider reports a nearly full window (gpt-4o: 128k, trigger at 80%).
    gw.upstream.script({
      type: "text",
      text: "ok",
      usage: { prompt_tokens: 110_000, completion_tokens: 100 }
    })
    await ask("step 13 of the long task")
    await ask("step 14 of the long task")
    expect(await compactions()).toBe(before + 1)
    const doc = history(gw, sid)
    expect(doc.compression).toHaveLength(1)
    const archived = [
      ...new Set(doc.messages.filter((m) => m.meta.archivedBy !== undefined).map((m) => m.meta.turn))
    ]
    expect(archived).toEqual([1, 2, 3])
    // The summary reached the model, and the archived turns did not.
    const sent = (gw.upstream.requests.at(-1)!.body as { messages: Sent }).messages
    expect(sent.some((m) => m.role === "system" && contentOf(m).includes("Archived Session Summary"))).toBe(
      true
    )
    const asked = sent.filter((m) => m.role === "user").map(contentOf)
    expect(asked).not.toContain("step 1 of the long task")
    expect(asked).toContain("step 4 of the long task")
    expect(asked.at(-1)).toBe("step 14 of the long task")
  })
})
