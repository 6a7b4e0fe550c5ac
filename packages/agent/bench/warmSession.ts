/**
 * The turn bench's session (`turn.bench.ts`, and `paired.ts` for `scripts/paired.mjs`): the turn
 * engine on the file store over a copy of the example data (a temporary folder, removed when the
 * process exits), the deterministic summarizer, memory as a source of every compile, tracing off
 * (as the gateway runs without an OTLP endpoint), gpt-4o; a session warmed to `warmTurns` turns.
 * `turn` runs one more turn of it (record, compile, a model answering at once, record, promote),
 * `compile` its engine's preview of the next one, `floor` what any durable turn of it must do (two
 * journal-sized appends, each made durable with fdatasync, and the compiled request serialized).
 * `phases` splits the last turn's time at the model's call: before it (the lock, the history read,
 * the input recorded, the compile), the call (the stub serializing the request) and after it (the
 * answer recorded and made durable, memory promoted, the lock released).
 * With `stages`, its turns run traced, through a tracer that keeps each span's duration by name
 * (`stages()`: the turn's own span, the lock's wait, compaction's check, the input and the answer
 * recorded, the compile and each of its stages): where a turn goes, as the gateway's traces show it.
 */
import { cpSync, mkdtempSync, rmSync } from "node:fs"
import { open } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import * as CompileCache from "@ctxo/compiler/CompileCache"
import type { OpenAIMessage } from "@ctxo/compiler/Render"
import * as Workspace from "@ctxo/compiler/Workspace"
import * as HistoryStore from "@ctxo/history/HistoryStore"
import * as Summarizer from "@ctxo/history/Summarizer"
import * as Store from "@ctxo/store/Store"
import { Effect, Layer, ManagedRuntime, Tracer } from "effect"
import * as Memory from "../src/Memory.ts"
import * as ModelClient from "../src/ModelClient.ts"
import * as TurnEngine from "../src/TurnEngine.ts"

const MODEL = "gpt-4o"
/**
 * The upstream body as the gateway makes it: `requestBody`, or `JSON.stringify` in the revisions
 * before it, which `pnpm paired` builds this harness against too.
 */
const requestBody: (body: ModelClient.RawBody, stream: boolean) => string =
  ModelClient.requestBody ?? ((body, stream) => JSON.stringify({ ...body, stream }))
const SESSION = "bench-turn"

/** A turn's time in milliseconds, split at the model's call. */
export interface TurnPhases {
  readonly before: number
  readonly model: number
  readonly after: number
}

export interface WarmSession {
  readonly turn: () => Promise<unknown>
  /** The last turn's time split at the model's call. */
  readonly phases: () => TurnPhases
  readonly compile: () => Promise<unknown>
  readonly floor: () => Promise<void>
  /** The number of messages in the last request a turn compiled. */
  readonly messages: () => number
  /** With `stages`: the milliseconds spent in spans of each name since `clearStages`. */
  readonly stages: () => ReadonlyMap<string, number>
  readonly clearStages: () => void
  readonly dispose: () => Promise<void>
}

/** The sessions' temporary folders, removed when the process exits (one listener for them all). */
const folders = new Set<string>()
process.on("exit", () => {
  for (const folder of folders) rmSync(folder, { recursive: true, force: true })
})

/** A tracer that adds each span's duration (milliseconds) to its name's total, and nothing else. */
const recordingTracer = (into: Map<string, number>): Tracer.Tracer => {
  let ids = 0
  return Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      let status: Tracer.SpanStatus = { _tag: "Started", startTime }
      const attributes = new Map<string, unknown>()
      const id = (++ids).toString(16)
      return {
        _tag: "Span",
        name,
        spanId: id,
        traceId: id,
        parent,
        context,
        get status() {
          return status
        },
        attributes,
        links,
        sampled: true,
        kind,
        end: (endTime, exit) => {
          status = { _tag: "Ended", startTime, endTime, exit }
          into.set(name, (into.get(name) ?? 0) + Number(endTime - startTime) / 1e6)
        },
        attribute: (key, value) => {
          attributes.set(key, value)
        },
        event: () => {},
        addLinks: () => {}
      }
    },
    context: (f) => f()
  })
}

export const makeWarmSession = async (
  warmTurns = 200,
  options: { readonly stages?: boolean } = {}
): Promise<WarmSession> => {
  const spans = new Map<string, number>()
  const traced =
    options.stages === true
      ? <A, E, R>(effect: Effect.Effect<A, E, R>) =>
          effect.pipe(Effect.withTracer(recordingTracer(spans)), Effect.withTracerEnabled(true))
      : <A, E, R>(effect: Effect.Effect<A, E, R>) => effect.pipe(Effect.withTracerEnabled(false))
  const data = mkdtempSync(join(tmpdir(), "ctxo-turn-bench-"))
  folders.add(data)
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

  /** The messages of the last request a turn compiled (the floor serializes the same). */
  let lastMessages: ReadonlyArray<OpenAIMessage> = []
  /** When the last turn's model call began and ended. */
  let called = { at: 0, done: 0 }
  let phases: TurnPhases = { before: 0, model: 0, after: 0 }
  const driver: TurnEngine.Driver = {
    model: (compiled) =>
      Effect.sync(() => {
        const at = performance.now()
        lastMessages = compiled.format === "openai" ? compiled.request.messages : []
        const body = requestBody({ model: MODEL, messages: lastMessages }, false)
        called = { at, done: performance.now() }
        return {
          text: `A token budget is the room a request has (${body.length} bytes sent).`,
          toolCalls: [],
          usage: { inputTokens: compiled.report.total ?? 0, outputTokens: 16 }
        }
      })
  }
  const turnOptions: TurnEngine.TurnOptions = { defaultModel: MODEL, maxSteps: 4, format: "openai" }
  let turnNumber = 0
  const turn = async () => {
    // A turn that does not call the model (none here) leaves its phases NaN, not the last one's.
    called = { at: Number.NaN, done: Number.NaN }
    const start = performance.now()
    const outcome = await runtime.runPromise(
      Effect.flatMap(TurnEngine.TurnEngine, (engine) =>
        engine.turn(
          { sessionId: SESSION, input: `Turn ${turnNumber++}: what is a token budget?`, model: MODEL },
          driver,
          turnOptions
        )
      ).pipe(traced)
    )
    phases = {
      before: called.at - start,
      model: called.done - called.at,
      after: performance.now() - called.done
    }
    return outcome
  }
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
    requestBody({ model: MODEL, messages: lastMessages }, false)
    await journal.write(record)
    await journal.datasync()
  }

  await runtime.runPromise(
    Effect.flatMap(Store.Store, (store) => store.createSession({ id: SESSION, concept: "benchmark" }))
  )
  for (let i = 0; i < warmTurns; i++) await turn()
  for (let i = 0; i < 20; i++) {
    await floor()
    await compile()
  }
  return {
    turn,
    phases: () => phases,
    compile,
    floor,
    messages: () => lastMessages.length,
    stages: () => spans,
    clearStages: () => spans.clear(),
    dispose: async () => {
      await journal.close()
      await runtime.dispose()
    }
  }
}
