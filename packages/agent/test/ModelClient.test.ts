import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Either, Option, Stream } from "effect"
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
  passthroughStream: (c: ModelClient.Service) => Stream.runDrain(c.passthroughStream(body))
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
        { type: "text", text: "Three." }
      )
      const events = yield* withClient((c) => Stream.runCollect(c.complete(body)))
      assert.deepInclude(Chunk.toReadonlyArray(events).at(-1), { _tag: "Done", text: "One.", toolCalls: [] })
      const answer = (yield* withClient((c) => c.passthrough(body))) as {
        choices: Array<{ message: { content: string } }>
      }
      assert.strictEqual(answer.choices[0]?.message.content, "Two.")
      const chunks = yield* withClient((c) => Stream.runCollect(c.passthroughStream(body)))
      const text = Chunk.toReadonlyArray(chunks)
        .map((chunk) => (chunk as ModelClient.Chunk).choices?.[0]?.delta?.content ?? "")
        .join("")
      assert.strictEqual(text, "Three.")
    }).pipe(withFake)
  )
})
