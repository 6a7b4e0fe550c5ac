import { createServer } from "node:http"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { openAIMessagesOf } from "@ctxo/compiler/Render"
import type { Message } from "@ctxo/history/Message"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Either, Fiber, Option, Stream } from "effect"
import { Agent } from "undici"
import { type FakeUpstream, type Reply, startFakeUpstream } from "../src/FakeUpstream.ts"
import * as ModelClient from "../src/ModelClient.ts"

// Each test has its own fake upstream: a request that reaches a shared one late (a loaded machine)
// would otherwise take the next test's scripted reply. Deadlines leave a loaded machine room.
let fake: FakeUpstream
const withFake = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.acquireUseRelease(
    Effect.promise(() => startFakeUpstream()).pipe(Effect.tap((f) => Effect.sync(() => (fake = f)))),
    () => effect,
    (f) => Effect.promise(() => f.close())
  )

const deadlines = { timeoutMs: 4_000, firstByteMs: 1_000, idleMs: 1_000 }
/** A client of the fake upstream, for the length of one call. */
const withClient = <A, E>(f: (c: ModelClient.Service) => Effect.Effect<A, E>) =>
  Effect.scoped(
    Effect.flatMap(
      Effect.suspend(() =>
        Effect.provide(
          ModelClient.ModelClient,
          ModelClient.layer({ apiKey: Option.none(), baseUrl: Option.some(fake.url), ...deadlines })
        )
      ),
      f
    )
  )
const body = { model: "gpt-4o", messages: [{ role: "user" as const, content: "hi" }] }

/** Each path's failure for one scripted reply. */
const paths = {
  complete: (c: ModelClient.Service) => Stream.runDrain(c.complete(body)),
  passthrough: (c: ModelClient.Service) => c.passthrough(body),
  passthroughEach: (c: ModelClient.Service) => c.passthroughEach(body, () => {})
}
/** The chunks of a streamed passthrough call, as they were handed on. */
const chunksOf = (c: ModelClient.Service) => {
  const handed: Array<Record<string, unknown>> = []
  return Effect.as(
    c.passthroughEach(body, (chunk) => void handed.push(chunk)),
    handed
  )
}

const cases: ReadonlyArray<{
  readonly reply: Reply
  readonly kind: ModelClient.UpstreamErrorKind
  readonly streamingOnly?: boolean
}> = [
  { reply: { type: "stall", after: "headers" }, kind: "timeout" },
  { reply: { type: "stall", after: "chunk" }, kind: "timeout" },
  { reply: { type: "hang" }, kind: "timeout" },
  { reply: { type: "empty" }, kind: "protocol" },
  { reply: { type: "not-sse" }, kind: "protocol", streamingOnly: true },
  { reply: { type: "malformed" }, kind: "protocol" },
  { reply: { type: "error", status: 503 }, kind: "status" },
  { reply: { type: "break" }, kind: "network" }
]

describe("ModelClient against a faulty upstream", () => {
  for (const [path, run] of Object.entries(paths))
    for (const c of cases) {
      if (c.streamingOnly && path === "passthrough") continue
      it.live(`${path}: ${JSON.stringify(c.reply)} fails as ${c.kind}, its request closed`, () =>
        Effect.gen(function* () {
          fake.script(c.reply)
          const result = yield* withClient(run).pipe(Effect.either)
          assert.isTrue(Either.isLeft(result))
          if (Either.isLeft(result)) assert.strictEqual(result.left.kind, c.kind)
          // The request was aborted, not left open.
          for (let i = 0; i < 200 && fake.inFlight() > 0; i++) yield* Effect.sleep("20 millis")
          assert.strictEqual(fake.inFlight(), 0)
        }).pipe(withFake)
      )
    }

  // A caller that stops (a client gone, a shutdown) while the upstream has not answered its headers
  // ends the call at once and aborts its request, long before the first-byte deadline.
  for (const [path, run] of Object.entries(paths))
    it.live(`${path}: interrupted while the upstream hangs, ends at once and closes its request`, () =>
      Effect.gen(function* () {
        fake.script({ type: "hang" })
        const started = Date.now()
        const fiber = yield* Effect.fork(withClient(run))
        for (let i = 0; i < 200 && fake.requests.length === 0; i++) yield* Effect.sleep("5 millis")
        yield* Fiber.interrupt(fiber)
        assert.isBelow(Date.now() - started, deadlines.firstByteMs)
        for (let i = 0; i < 200 && fake.inFlight() > 0; i++) yield* Effect.sleep("5 millis")
        assert.strictEqual(fake.inFlight(), 0)
      }).pipe(withFake)
    )

  it.live("keeps a 429's status, code and Retry-After", () =>
    Effect.gen(function* () {
      fake.script({ type: "error", status: 429, code: "rate_limit_exceeded", retryAfter: "7" })
      const error = yield* withClient((c) => c.passthrough(body)).pipe(Effect.flip)
      assert.deepStrictEqual(
        { kind: error.kind, status: error.status, code: error.code, retryAfter: error.retryAfter },
        { kind: "status", status: 429, code: "rate_limit_exceeded", retryAfter: "7" }
      )
    }).pipe(withFake)
  )

  it.live("answers whole replies on every path", () =>
    Effect.gen(function* () {
      fake.script(
        { type: "text", text: "One." },
        { type: "text", text: "Two." },
        { type: "text", text: "Three." },
        { type: "text", text: "Four, and a longer answer than a chunk holds." }
      )
      const events = yield* withClient((c) => Stream.runCollect(c.complete(body)))
      assert.deepInclude(Chunk.toReadonlyArray(events).at(-1), { _tag: "Done", text: "One.", toolCalls: [] })
      const answer = (yield* withClient((c) => c.passthrough(body))) as {
        choices: Array<{ message: { content: string } }>
      }
      assert.strictEqual(answer.choices[0]?.message.content, "Two.")
      const chunks = yield* withClient(chunksOf)
      const text = chunks
        .map((chunk) => (chunk as ModelClient.Chunk).choices?.[0]?.delta?.content ?? "")
        .join("")
      assert.strictEqual(text, "Three.")
      // Each chunk handed on as it comes, as the upstream sent it.
      const handed = yield* withClient(chunksOf)
      assert.isAbove(handed.length, 2)
      assert.strictEqual(
        handed.map((chunk) => (chunk as ModelClient.Chunk).choices?.[0]?.delta?.content ?? "").join(""),
        "Four, and a longer answer than a chunk holds."
      )
      for (const chunk of handed) assert.deepStrictEqual(JSON.parse(ModelClient.sentTextOf(chunk)!), chunk)
    }).pipe(withFake)
  )
})

/** A server answering every request with `answer` (status, headers, raw body parts). */
const rawServer = (answer: {
  status: number
  headers?: Record<string, string>
  parts: ReadonlyArray<string>
}) =>
  Effect.acquireRelease(
    Effect.promise(
      () =>
        new Promise<{ url: string; server: import("node:http").Server }>((resolve) => {
          const server = createServer((req, res) => {
            req.resume()
            req.on("end", async () => {
              res.writeHead(answer.status, answer.headers ?? { "content-type": "text/event-stream" })
              for (const part of answer.parts) {
                res.write(part)
                await new Promise((r) => setTimeout(r, 5))
              }
              res.end()
            })
          })
          server.listen(0, "127.0.0.1", () =>
            resolve({ url: `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`, server })
          )
        })
    ),
    ({ server }) =>
      Effect.promise(() => {
        server.closeAllConnections()
        return new Promise((r) => server.close(r))
      })
  )
const clientOf = (url: string) =>
  ModelClient.layer({ apiKey: Option.none(), baseUrl: Option.some(url), ...deadlines })

describe("ModelClient reads Server-Sent Events as the upstream wrote them", () => {
  const chunk = (content: string, finish: string | null = null) =>
    JSON.stringify({ choices: [{ index: 0, delta: { content }, finish_reason: finish }] })

  it.live("CRLF and CR line ends, data over several lines, comments, a last event with no blank line", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const multiLine = chunk("Two").replace('"choices":', '"choices":\ndata: ')
        const { url } = yield* rawServer({
          status: 200,
          parts: [
            `: keep-alive\r\n\r\ndata: ${chunk("One ")}\r\n\r\n`,
            `data: ${multiLine.slice(0, 10)}`,
            `${multiLine.slice(10)}\r\r`,
            `data: ${chunk(".", "stop")}`
          ]
        })
        const all = yield* Effect.provide(Effect.flatMap(ModelClient.ModelClient, chunksOf), clientOf(url))
        assert.strictEqual(
          all.map((c) => (c as ModelClient.Chunk).choices?.[0]?.delta?.content ?? "").join(""),
          "One Two."
        )
        // Data sent over several lines is not passed on as one line of it.
        assert.include(ModelClient.sentTextOf(all[1]!) ?? "", "\n")
        assert.strictEqual(ModelClient.sentTextOf(all[0]!), chunk("One "))
      })
    )
  )

  it.live("an error that is a string, in the middle of a stream, fails the call with its text", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { url } = yield* rawServer({
          status: 200,
          parts: [`data: ${chunk("Half")}\n\n`, `data: {"error":"overloaded"}\n\n`]
        })
        const error = yield* Effect.provide(
          Effect.flatMap(ModelClient.ModelClient, paths.passthroughEach),
          clientOf(url)
        ).pipe(Effect.flip)
        assert.deepStrictEqual(
          { kind: error.kind, reason: error.reason },
          { kind: "status", reason: "overloaded" }
        )
      })
    )
  )

  it.live("a redirect is an error with its status, not an empty answer", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { url } = yield* rawServer({
          status: 307,
          headers: { location: "https://example.invalid/v1/chat/completions" },
          parts: []
        })
        const error = yield* Effect.provide(
          Effect.flatMap(ModelClient.ModelClient, (c) => c.passthrough(body)),
          clientOf(url)
        ).pipe(Effect.flip)
        assert.deepStrictEqual({ kind: error.kind, status: error.status }, { kind: "status", status: 307 })
      })
    )
  )
})

// The process's pool is made at its first call (undici is imported then): a call made while the
// pool is not there yet goes out once it is, and one stopped meanwhile never goes out.
describe("ModelClient while its connection pool loads", () => {
  /** A pool handed over when the test says so; closed when the test ends, whatever its outcome. */
  const pending = Effect.acquireRelease(
    Effect.sync(() => {
      let give: (pool: Agent) => void = () => {}
      const promise = new Promise<Agent>((resolve) => {
        give = resolve
      })
      const agent = new Agent({ headersTimeout: 0, bodyTimeout: 0 })
      return { promise, agent, give: () => give(agent) }
    }),
    ({ agent }) => Effect.promise(() => agent.close())
  )
  const clientWith = (pool: Promise<Agent>) =>
    ModelClient.make(
      { apiKey: "none", baseURL: fake.url },
      fake.url,
      { totalMs: deadlines.timeoutMs, firstByteMs: deadlines.firstByteMs, idleMs: deadlines.idleMs },
      pool
    )

  it.live("sends a call made meanwhile once the pool is there, and answers it", () =>
    Effect.gen(function* () {
      fake.script({ type: "text", text: "Pooled." })
      const pool = yield* pending
      const fiber = yield* Effect.fork(clientWith(pool.promise).passthrough(body))
      yield* Effect.sleep("50 millis")
      assert.strictEqual(fake.requests.length, 0)
      pool.give()
      const answer = (yield* Fiber.join(fiber)) as {
        readonly choices: ReadonlyArray<{ readonly message: { readonly content: string } }>
      }
      assert.strictEqual(answer.choices[0]?.message.content, "Pooled.")
      assert.strictEqual(fake.requests.length, 1)
    }).pipe(Effect.scoped, withFake)
  )

  it.live("never sends a call stopped before the pool is there", () =>
    Effect.gen(function* () {
      const pool = yield* pending
      const fiber = yield* Effect.fork(clientWith(pool.promise).passthrough(body))
      yield* Effect.sleep("20 millis")
      yield* Fiber.interrupt(fiber)
      pool.give()
      yield* Effect.sleep("100 millis")
      assert.strictEqual(fake.requests.length, 0)
      assert.strictEqual(fake.inFlight(), 0)
    }).pipe(Effect.scoped, withFake)
  )
})

describe("ModelClient sends a compiled request's body as JSON.stringify writes it", () => {
  // A history as the compiler renders it (frozen messages, the same objects every compile: the
  // compiler keeps their JSON), and the messages of a request around them that are not.
  const history = [
    {
      id: "t1-0",
      role: "user",
      parts: [
        { _tag: "text", text: "Qu'est-ce qu'un budget de jetons ? 令牌预算是什么？ \u2028 \"quoted\"\n" }
      ],
      meta: { turn: 1, kind: "input" }
    },
    {
      id: "t1-1",
      role: "assistant",
      parts: [{ _tag: "tool-call", callId: "call_1", name: "search", input: { q: "budget" } }],
      meta: { turn: 1, kind: "step" }
    },
    {
      id: "t1-2",
      role: "tool",
      parts: [{ _tag: "tool-result", callId: "call_1", name: "search", status: "success", data: "😀" }],
      meta: { turn: 1, kind: "step" }
    }
  ].flatMap((m) => openAIMessagesOf(m as Message)) as ReadonlyArray<Record<string, unknown>>

  it("byte for byte, whatever is frozen, in every key order, with what JSON.stringify leaves out", () => {
    assert.isTrue(history.every((m) => Object.isFrozen(m)))
    const bodies: ReadonlyArray<ModelClient.RawBody> = [
      {
        model: "gpt-4o",
        messages: [{ role: "system", content: "Rules." }, ...history, { role: "user", content: "Next?" }]
      },
      { messages: [...history], model: "gpt-4o", temperature: 0.2, user: undefined, stop: ["\n"] },
      {
        user: undefined,
        messages: [history[0]!, { role: "user", content: "between" }, history[2]!],
        model: "m"
      },
      { model: "m", messages: [undefined as never, history[1]!, null as never] },
      { model: "m", messages: [{ role: "user", content: "nothing frozen" }] },
      { model: "m", messages: [] }
    ]
    for (const stream of [false, true])
      for (const body of bodies) {
        const expected = JSON.stringify({ ...body, stream })
        // Twice: the second from the kept JSON.
        for (let i = 0; i < 2; i++) {
          assert.strictEqual(ModelClient.requestBody(body, stream), expected)
        }
      }
  })

  it.live("what the upstream receives over a session's growing history", () =>
    Effect.gen(function* () {
      const sent: Array<string> = []
      let messages: ReadonlyArray<Record<string, unknown>> = []
      for (const next of history) {
        messages = [...messages, next]
        const body = { model: "m", messages: [{ role: "system", content: "Rules." }, ...messages] }
        sent.push(JSON.stringify({ ...body, stream: false }))
        yield* withClient((c) => c.passthrough(body))
      }
      assert.deepStrictEqual(
        fake.requests.map((r) => r.text),
        sent
      )
    }).pipe(withFake)
  )
})

describe("ModelClient's local model (no key, no base URL: the gateway's default)", () => {
  it.live("keeps nothing of the requests it answered", () =>
    Effect.gen(function* () {
      // A full collection on demand (the test runner has no --expose-gc).
      setFlagsFromString("--expose-gc")
      const gc = runInNewContext("gc") as () => void
      const client = yield* ModelClient.ModelClient
      assert.isTrue(client.upstream.startsWith("local ("), client.upstream)
      // A session's turn sends its whole history: here 256 KB a request.
      const long = { model: "gpt-4o", messages: [{ role: "user" as const, content: "x".repeat(256 * 1024) }] }
      const answered = (answer: unknown) =>
        assert.strictEqual(
          (answer as { readonly choices: ReadonlyArray<{ readonly finish_reason: string }> }).choices[0]
            ?.finish_reason,
          "stop"
        )
      answered(yield* client.passthrough(long))
      gc()
      const before = process.memoryUsage().heapUsed
      for (let i = 0; i < 40; i++) answered(yield* client.passthrough(long))
      gc()
      // Kept, each request's text and the content parsed from it: 40 x 2 x 256 KB, 20 MB.
      const grown = (process.memoryUsage().heapUsed - before) / 1048576
      assert.isBelow(grown, 5, `the heap grew ${grown.toFixed(1)} MB over 40 requests of 256 KB`)
    }).pipe(
      Effect.provide(ModelClient.layer({ apiKey: Option.none(), baseUrl: Option.none(), ...deadlines }))
    )
  )
})
