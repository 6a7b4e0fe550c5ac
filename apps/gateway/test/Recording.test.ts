import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import { check } from "@ctxo/replay/Invariants"
import { defaultProfiles, live, replaySession } from "@ctxo/replay/Replay"
import { parseSession } from "@ctxo/replay/Session"
import { Effect, Either, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { chatEvents, startGateway } from "./harness.ts"

let gw: Awaited<ReturnType<typeof startGateway>>
beforeAll(async () => {
  gw = await startGateway()
})
afterAll(() => gw.close())

const post = (path: string, body: unknown, method = "POST") =>
  fetch(`${gw.baseUrl}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body)
  })

describe("recording real traffic as a regression test", () => {
  it("exports a session as ctxo.session/v1 with the full tool results, and it replays clean", async () => {
    await post("/api/sessions", { id: "recorded", concept: "a session worth keeping" })
    await post(
      "/api/sessions/recorded/file?path=src/big.ts",
      { content: Array.from({ length: 600 }, (_, i) => `export const v${i} = ${i}`).join("\n") },
      "PUT"
    )
    await post(
      "/api/sessions/recorded/config",
      { policy: "code-agent", model: "gpt-4o", systemPrompt: [{ type: "global", file: "system-prompt.md" }] },
      "PUT"
    )
    gw.upstream.script(
      {
        type: "tool_calls",
        text: "Thought: read it.",
        calls: [{ id: "r1", name: "read_file", arguments: { path: "src/big.ts" } }]
      },
      { type: "text", text: "600 constants, v0 to v599." }
    )
    await gw.run(
      chatEvents("recorded", { message: "What is in src/big.ts?", model: "gpt-4o", idempotencyKey: "rec-1" })
    )
    await gw.run(chatEvents("recorded", { message: "Thanks!", model: "gpt-4o" }))

    const response = await fetch(`${gw.baseUrl}/api/sessions/recorded/recording`)
    expect(response.status).toBe(200)
    const text = await response.text()
    const session = parseSession(text, "recorded.json")
    expect(Either.isRight(session)).toBe(true)
    const recorded = Either.getOrThrow(session)
    expect(recorded).toMatchObject({
      format: "ctxo.session/v1",
      id: "recorded",
      policy: "code-agent",
      description: "a session worth keeping"
    })
    expect(recorded.turns.map((t) => t.user)).toEqual(["What is in src/big.ts?", "Thanks!"])
    expect(recorded.turns[0]!.inputKey).toBe("rec-1")
    // History kept 500 lines of the read; the recording has what the tool returned: all 600.
    const result = recorded.turns[0]!.steps.find((s) => s.type === "tool_result")
    expect(
      result?.type === "tool_result" &&
        String((result.result.data as { content: string }).content).split("\n")
    ).toHaveLength(600)
    expect(Object.keys(recorded.files ?? {})).toEqual(["src/big.ts"])

    const evidence = await Effect.runPromise(
      replaySession(recorded, defaultProfiles[0]!).pipe(
        Effect.provide(Layer.mergeAll(live, ModelRegistry.layer(), Tokenizer.layer()))
      )
    )
    expect(check(evidence)).toEqual([])
    expect(evidence.points.length).toBe(3)
  })

  it("has nothing to record for a session without turns", async () => {
    await post("/api/sessions", { id: "empty", concept: "" })
    const response = await fetch(`${gw.baseUrl}/api/sessions/empty/recording`)
    expect(response.status).toBe(422)
    expect(await response.json()).toMatchObject({ error: { tag: "NothingRecorded" } })
  })
})
