/**
 * A warm session's turn in one process (`TurnEngine.turn`): the gateway's session row without HTTP
 * and the upstream, so what the engine itself costs shows apart from the network and the model.
 * A turn records the input (a journal append, made durable with fdatasync while the first request
 * compiles), compiles the session's context, hands the request to a model that answers at once
 * (serializing it, as the gateway does before sending it), records the answer (an append and its
 * fdatasync) and promotes what matters to memory. Side by side, in the same rounds:
 *   floor:   what any durable turn of this session must do: two journal-sized appends, each made
 *            durable with fdatasync (through the thread pool, as the store does), and the compiled
 *            request serialized; no compile, no Effect;
 *   compile: the session's warm compile alone (the engine's preview: its lock, its history, one
 *            compile with the previous cut).
 * The file store on a copy of the example data, the deterministic summarizer, memory as a source of
 * every compile, tracing off (as the gateway runs without an OTLP endpoint); gpt-4o. A session is
 * warmed to 200 turns, then each of `CTXO_BENCH_ROUNDS` rounds (default 5) times 60 turns, 60
 * floors and 60 compiles, interleaved. p50 and p99 of each, and the turn's ratio to the floor.
 */
import { cpSync, mkdtempSync, rmSync } from "node:fs"
import { open } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { performance } from "node:perf_hooks"
import { fileURLToPath } from "node:url"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import type { CompileResult } from "@ctxo/compiler/Compile"
import * as CompileCache from "@ctxo/compiler/CompileCache"
import * as Workspace from "@ctxo/compiler/Workspace"
import * as HistoryStore from "@ctxo/history/HistoryStore"
import * as Summarizer from "@ctxo/history/Summarizer"
import * as Store from "@ctxo/store/Store"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as Memory from "../src/Memory.ts"
import * as TurnEngine from "../src/TurnEngine.ts"

const rounds = Math.max(1, Number(process.env.CTXO_BENCH_ROUNDS ?? 5))
const PER_ROUND = 60
const WARM_TURNS = 200
const MODEL = "gpt-4o"
const SESSION = "bench-turn"

const data = mkdtempSync(join(tmpdir(), "ctxo-turn-bench-"))
process.on("exit", () => rmSync(data, { recursive: true, force: true }))
cpSync(fileURLToPath(new URL("../../../fixtures/data", import.meta.url)), data, { recursive: true })

const base = Layer.mergeAll(
  Workspace.layerStore,
  HistoryStore.layerStore,
  ModelRegistry.layer(),
  Tokenizer.layer(),
  TurnEngine.seamsLive,
  Summarizer.layerDeterministic,
  CompileCache.layer
).pipe(Layer.provideMerge(Store.layer(data)))
const runtime = ManagedRuntime.make(
  TurnEngine.layer.pipe(Layer.provideMerge(Memory.layer()), Layer.provideMerge(base))
)

/** The last request a turn compiled (the floor serializes the same). */
let lastRequest: CompileResult["request"] | undefined
const driver: TurnEngine.Driver = {
  model: (compiled) =>
    Effect.sync(() => {
      lastRequest = compiled.request
      const body = JSON.stringify({ model: MODEL, messages: lastRequest })
      return {
        text: `A token budget is the room a request has (${body.length} bytes sent).`,
        toolCalls: [],
        usage: { inputTokens: compiled.report.total ?? 0, outputTokens: 16 }
      }
    })
}
const options: TurnEngine.TurnOptions = { defaultModel: MODEL, maxSteps: 4, format: "openai" }
let turnNumber = 0
const turn = () =>
  runtime.runPromise(
    Effect.flatMap(TurnEngine.TurnEngine, (engine) =>
      engine.turn(
        { sessionId: SESSION, input: `Turn ${turnNumber++}: what is a token budget?`, model: MODEL },
        driver,
        options
      )
    ).pipe(Effect.withTracerEnabled(false))
  )
const compile = () =>
  runtime.runPromise(
    Effect.flatMap(TurnEngine.TurnEngine, (engine) =>
      engine.preview({
        sessionId: SESSION,
        input: `Turn ${turnNumber}: what is a token budget?`,
        model: MODEL,
        defaultModel: MODEL
      })
    ).pipe(Effect.withTracerEnabled(false))
  )

// The floor's journal: records of a turn's size, appended and made durable one by one.
const journal = await open(join(data, "floor.journal"), "a")
const record = `${JSON.stringify({ seq: 0, sum: "00000000", patch: { keep: 0, messages: [{ id: "t1-0", role: "user", parts: [{ _tag: "text", text: "Turn 0: what is a token budget?" }], meta: { turn: 1, kind: "input", createdAt: new Date(0).toISOString() } }] } })}\n`
const floor = async () => {
  await journal.write(record)
  await journal.datasync()
  JSON.stringify({ model: MODEL, messages: lastRequest })
  await journal.write(record)
  await journal.datasync()
}

const quantile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}
const timed = async (f: () => Promise<unknown>, into: Array<number>) => {
  const start = performance.now()
  await f()
  into.push(performance.now() - start)
}

await runtime.runPromise(
  Effect.flatMap(Store.Store, (store) => store.createSession({ id: SESSION, concept: "benchmark" }))
)
for (let i = 0; i < WARM_TURNS; i++) await turn()
for (let i = 0; i < 20; i++) {
  await floor()
  await compile()
}

const turns: Array<number> = []
const floors: Array<number> = []
const compiles: Array<number> = []
let turnCpu = 0
for (let r = 0; r < rounds; r++)
  for (let i = 0; i < PER_ROUND; i++) {
    const cpu = process.cpuUsage()
    await timed(turn, turns)
    const used = process.cpuUsage(cpu)
    turnCpu += (used.user + used.system) / 1000
    await timed(floor, floors)
    await timed(compile, compiles)
  }
await journal.close()
const messages = lastRequest !== undefined && "messages" in lastRequest ? lastRequest.messages.length : 0
const ms = (n: number) => `${n.toFixed(2)} ms`
console.log(
  `turn bench: ${turns.length} turns of a session warmed to ${WARM_TURNS} (${messages} messages in its request at the end), interleaved with the floor and the compile; Node ${process.version}`
)
console.log(
  `  engine turn (record, compile, model stub, record, promote)  p50 ${ms(quantile(turns, 0.5))}, p99 ${ms(quantile(turns, 0.99))}, process CPU ${ms(turnCpu / turns.length)} a turn (all threads)`
)
console.log(
  `  floor (2 appends + fdatasync, the request serialized)        p50 ${ms(quantile(floors, 0.5))}, p99 ${ms(quantile(floors, 0.99))}`
)
console.log(
  `  compile alone (the engine's preview of the next turn)       p50 ${ms(quantile(compiles, 0.5))}, p99 ${ms(quantile(compiles, 0.99))}`
)
console.log(
  `  the turn is ${(quantile(turns, 0.5) / quantile(floors, 0.5)).toFixed(2)}x the floor at p50; it adds ${ms(quantile(turns, 0.5) - quantile(floors, 0.5))} to it (goal of the gateway's session row: 2 ms added over direct)`
)
await runtime.dispose()
