/**
 * A turn makes no generator function of its own: every generator its Effects run (`Effect.gen`,
 * `Effect.fnUntraced`) is one made once, at a module's or a service's making. V8 gives a generator
 * function made per call a hidden class of its own, in the old space, which holds the function and
 * everything it closes over until a full collection: every turn's request, history and compile
 * then outlived the scavenges that should have freed them, and each scavenge copied and promoted
 * megabytes (docs/hot-path.md, the nineteenth round).
 *
 * How it is seen: a generator object's prototype is its function's own `prototype`, one object per
 * generator function. A supervisor notes the prototype of every generator a round of turns runs (a
 * plain turn, a turn that runs a tool, one memory promotes, one that hands its tool calls to the
 * client and the call that continues it; the journal folded every few records); a round that runs
 * a generator function made for it shows a prototype no round before it showed.
 */

import { cpSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import type { CompileResult } from "@ctxo/compiler/Compile"
import * as CompileCache from "@ctxo/compiler/CompileCache"
import * as Workspace from "@ctxo/compiler/Workspace"
import * as HistoryStore from "@ctxo/history/HistoryStore"
import * as Summarizer from "@ctxo/history/Summarizer"
import * as Store from "@ctxo/store/Store"
import { afterAll, describe, expect, it } from "@effect/vitest"
import type { Fiber } from "effect"
import { Effect, Layer, ManagedRuntime, RuntimeFlags, RuntimeFlagsPatch, Supervisor } from "effect"
import * as Memory from "../src/Memory.ts"
import * as TurnEngine from "../src/TurnEngine.ts"

const data = mkdtempSync(join(tmpdir(), "ctxo-hot-path-"))
cpSync(fileURLToPath(new URL("../../../fixtures/data", import.meta.url)), data, { recursive: true })

/** The prototypes of the generators the supervised fibers ran (Effect runs each as an `Iterator` step). */
class GeneratorPrototypes extends Supervisor.AbstractSupervisor<void> {
  readonly seen = new Set<object>()
  override get value() {
    return Effect.void
  }
  override onEffect<A, E>(
    _fiber: Fiber.RuntimeFiber<A, E>,
    effect: Effect.Effect<unknown, unknown, unknown>
  ) {
    const step = effect as unknown as { readonly _op?: string; readonly effect_instruction_i0?: unknown }
    const generator = step.effect_instruction_i0
    if (step._op === "Iterator" && typeof generator === "object" && generator !== null)
      this.seen.add(Object.getPrototypeOf(generator) as object)
  }
}

// The gateway's file store and engine, as `pnpm start` composes them (memory a source of every compile).
const runtime = ManagedRuntime.make(
  TurnEngine.layer.pipe(
    Layer.provideMerge(Memory.layer()),
    Layer.provideMerge(
      Layer.mergeAll(
        Workspace.layerStore,
        HistoryStore.layerStore,
        ModelRegistry.layer(),
        Tokenizer.layer(),
        TurnEngine.seamsLive,
        Summarizer.layerDeterministic,
        CompileCache.layer
      ).pipe(Layer.provideMerge(Store.layer(data, { journal: { foldRecords: 6, foldDelayMs: 10 } })))
    )
  )
)

afterAll(async () => {
  await runtime.dispose()
  rmSync(data, { recursive: true, force: true })
})

const SESSION = "hot-path"
const options: TurnEngine.TurnOptions = { defaultModel: "gpt-4o", maxSteps: 4, format: "openai" }
const answer = (compiled: CompileResult) => ({
  text: `A token budget is the room a request has (${compiled.report.total ?? 0} tokens).`,
  toolCalls: [],
  usage: { inputTokens: compiled.report.total ?? 0, outputTokens: 12 }
})
/** A tool call first (one a step), then the answer. */
const callingTool = (context: TurnEngine.StepContext) => context.step === 1
const toolCall = (turn: number): TurnEngine.ToolCall => ({
  id: `call-${turn}`,
  name: "read_file",
  arguments: JSON.stringify({ path: "notes.md" })
})
const plain: TurnEngine.Driver = { model: (compiled) => Effect.succeed(answer(compiled)) }
const withTool: TurnEngine.Driver = {
  model: (compiled, context) =>
    Effect.succeed(
      callingTool(context) ? { text: "", toolCalls: [toolCall(context.turn)] } : answer(compiled)
    ),
  runTool: () =>
    Effect.succeed({ status: "success" as const, text: "The notes say: a budget is shared by the sources." })
}
/** Tool calls handed to the client (no `runTool`): the turn waits for `continueTurn`. */
const toClient: TurnEngine.Driver = {
  model: (compiled, context) =>
    Effect.succeed(
      callingTool(context) ? { text: "", toolCalls: [toolCall(context.turn)] } : answer(compiled)
    )
}

let number = 0
/** A round of the turns a session takes (a generator made once, as the code it tests makes them). */
function* roundOfTurns() {
  const engine = yield* TurnEngine.TurnEngine
  const input = (text: string) => ({
    sessionId: SESSION,
    input: `Turn ${number++}: ${text}`,
    model: "gpt-4o"
  })
  yield* engine.turn(input("what is a token budget?"), plain, options)
  yield* engine.turn(input("read my notes on budgets."), withTool, options)
  yield* engine.turn(input("remember: we decided to ship v2.1 on 2026-12-01."), plain, options)
  const handed = yield* engine.turn(input("read my notes again."), toClient, options)
  if (handed._tag !== "ToolCalls") throw new Error(`the turn answered instead of handing its tool calls over`)
  yield* engine.continueTurn(
    {
      sessionId: SESSION,
      model: "gpt-4o",
      results: handed.toolCalls.map((c) => ({
        callId: c.id,
        result: { status: "success" as const, text: "Shared by the sources." }
      }))
    },
    plain,
    options
  )
}
/** A round of turns, its generators' prototypes noted by `supervisor` when given. */
const round = (supervisor?: GeneratorPrototypes) => {
  const run = Effect.gen(roundOfTurns)
  return runtime.runPromise(
    supervisor === undefined
      ? run
      : run.pipe(
          Effect.supervised(supervisor),
          Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision))
        )
  )
}

describe("the turn's hot path", () => {
  it("makes no generator function per turn: a round of turns runs only generators earlier rounds ran", async () => {
    await runtime.runPromise(
      Effect.flatMap(Store.Store, (store) => store.createSession({ id: SESSION, concept: "hot path" }))
    )
    // Past the first rounds' one-time paths (the session's first reads, memory's first entries).
    for (let i = 0; i < 2; i++) await round()
    const earlier = new GeneratorPrototypes()
    for (let i = 0; i < 2; i++) await round(earlier)
    const later = new GeneratorPrototypes()
    await round(later)
    // Not a vacuous pass: the supervisor sees the rounds' generators.
    expect(earlier.seen.size).toBeGreaterThan(15)
    expect(later.seen.size).toBeGreaterThan(15)
    const made = [...later.seen].filter((prototype) => !earlier.seen.has(prototype))
    expect(
      made.length,
      `${made.length} of the ${later.seen.size} generators the last round of turns ran are of generator functions made for them (a per-call Effect.gen(function* ...) on a turn's path; make it once: Effect.fnUntraced, or a generator function the call passes its values to)`
    ).toBe(0)
  })
})
