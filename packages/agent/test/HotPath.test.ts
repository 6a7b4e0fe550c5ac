/**
 * A turn makes no generator function of its own: every generator its Effects run (`Effect.gen`,
 * `Effect.fnUntraced`) is one made once, at a module's or a service's making. V8 gives a generator
 * function made per call a hidden class of its own, in the old space, which holds the function and
 * everything it closes over until a full collection: every turn's request, history and compile
 * then outlived the scavenges that should have freed them, and each scavenge copied and promoted
 * megabytes (README, the hot path's nineteenth round).
 *
 * How it is seen: a generator object's prototype is its function's own `prototype`, one object per
 * generator function. A supervisor notes the prototype of every generator a turn's fibers run; a
 * turn that runs a generator function made for it shows a prototype no turn before it showed.
 */

import { cpSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
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
      ).pipe(Layer.provideMerge(Store.layer(data)))
    )
  )
)

afterAll(async () => {
  await runtime.dispose()
  rmSync(data, { recursive: true, force: true })
})

const SESSION = "hot-path"
const driver: TurnEngine.Driver = {
  model: (compiled) =>
    Effect.succeed({
      text: `A token budget is the room a request has (${compiled.report.total ?? 0} tokens).`,
      toolCalls: [],
      usage: { inputTokens: compiled.report.total ?? 0, outputTokens: 12 }
    })
}
let number = 0
/** One turn, its generators' prototypes noted by `supervisor` when given. */
const turn = (supervisor?: GeneratorPrototypes) => {
  const run = Effect.flatMap(TurnEngine.TurnEngine, (engine) =>
    engine.turn(
      { sessionId: SESSION, input: `Turn ${number++}: what is a token budget?`, model: "gpt-4o" },
      driver,
      { defaultModel: "gpt-4o", maxSteps: 4, format: "openai" }
    )
  )
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
  it("makes no generator function per turn: a turn runs only generators earlier turns ran", async () => {
    await runtime.runPromise(
      Effect.flatMap(Store.Store, (store) => store.createSession({ id: SESSION, concept: "hot path" }))
    )
    // Past the first turns' one-time paths (the session's first read, memory's first entries).
    for (let i = 0; i < 4; i++) await turn()
    const earlier = new GeneratorPrototypes()
    for (let i = 0; i < 3; i++) await turn(earlier)
    // Not a vacuous pass: the supervisor sees the turn's generators.
    expect(earlier.seen.size).toBeGreaterThan(15)
    const later = new GeneratorPrototypes()
    await turn(later)
    await turn(later)
    const made = [...later.seen].filter((prototype) => !earlier.seen.has(prototype))
    expect(
      made.length,
      `${made.length} of the ${later.seen.size} generators the last two turns ran are of generator functions made for them (a per-call Effect.gen(function* ...) on the turn's path; make it once: Effect.fnUntraced, or a generator function the call passes its values to)`
    ).toBe(0)
  })
})
