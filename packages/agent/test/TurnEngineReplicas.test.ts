/**
 * Two processes on the same data (two gateway replicas; here two stores on one data root): what an
 * engine keeps of a session between turns (its last compile, for a stable cut and the prompt-cache
 * prefix) is used only while the session's history is the one the engine left. A turn recorded by
 * the other process makes it compile afresh from what is stored, never from its own stale state.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Store from "@ctxo/store/Store"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as TurnEngine from "../src/TurnEngine.ts"
import { baseOver } from "./services.ts"

const root = mkdtempSync(join(tmpdir(), "ctxo-replicas-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))

const answer = (text: string): TurnEngine.Driver => ({
  model: () => Effect.succeed({ text, toolCalls: [] })
})
const options: TurnEngine.TurnOptions = { defaultModel: "openai/gpt-4o", maxSteps: 2 }
const preview = (engine: TurnEngine.Service) =>
  engine.preview({ sessionId: "s", input: "next question", defaultModel: "openai/gpt-4o" })

describe("two engines on the same data", () => {
  it("an engine compiles afresh once the other recorded a turn, and keeps its cut while nobody else did", async () => {
    const one = Store.makeUnsafe(root)
    const two = Store.makeUnsafe(root)
    await Effect.runPromise(one.createSession({ id: "s", concept: "" }))
    const engineOf = (store: Store.Service) =>
      Effect.runPromise(TurnEngine.make.pipe(Effect.provide(baseOver(store))))
    const [a, b] = [await engineOf(one), await engineOf(two)]
    const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
    await run(a.turn({ sessionId: "s", input: "first question" }, answer("first answer"), options))
    // Nobody else wrote: the engine's last compile is the previous one (its leading messages reused).
    expect((await run(preview(a))).prefix.unchangedMessages).toBeGreaterThan(0)
    await run(b.turn({ sessionId: "s", input: "second question" }, answer("second answer"), options))
    // The other process recorded a turn: nothing of the engine's own state is trusted.
    const afresh = await run(preview(a))
    expect(afresh.prefix.unchangedMessages).toBe(0)
    expect(JSON.stringify(afresh.request)).toContain("second answer")
    // Its next turn compiles afresh too, and it is the engine's own again afterwards.
    await run(a.turn({ sessionId: "s", input: "third question" }, answer("third answer"), options))
    expect((await run(preview(a))).prefix.unchangedMessages).toBeGreaterThan(0)
    await run(Effect.all([one.flush, two.flush]))
  })
})
