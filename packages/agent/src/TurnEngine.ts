/**
 * The turn engine: the one way a turn of a session runs, whoever asks (the SSE chat, the
 * OpenAI-compatible endpoint in session mode, the CLI, the replay harness and the eval gate).
 *
 *   lock the session (held for the whole turn, streaming included)
 *   -> refuse a session that is not active (paused, ended: `SessionNotActive`)
 *   -> a retry of a finished turn answers from history; a reused key with another message is refused
 *   -> refuse an input that cannot fit, before anything is recorded or archived
 *   -> compaction check (from the last usage the provider reported, kept in history)
 *   -> begin the turn (the input once, with its references)
 *   -> each step: compile (history compressed, the running turn with full observations, rules,
 *      references and reminders of this turn) -> model -> record -> tools -> record
 *   -> end the turn (the answer, with its usage)
 *
 * Its seams are services: the compiler (`ContextCompiler`), the compactor (`HistoryCompactor`)
 * and the model and tools a caller drives it with (`Driver`). The eval gate swaps the first two
 * for broken ones to prove the checks catch them, on the replay and the gateway paths alike.
 * Per-session state (the last compile, for a stable cut; the read tracker) is bounded and evicted
 * when idle.
 */
import type { ResolvedModel } from "@ctxo/budget/ModelRegistry"
import { ModelRegistry } from "@ctxo/budget/ModelRegistry"
import { Tokenizer } from "@ctxo/budget/Tokenizer"
import type { CompileError, CompileOptions, CompileResult, CompileState } from "@ctxo/compiler/Compile"
import { compile } from "@ctxo/compiler/Compile"
import * as CompileCache from "@ctxo/compiler/CompileCache"
import { historyTokens } from "@ctxo/compiler/HistoryTokens"
import type { Manifest } from "@ctxo/compiler/Manifest"
import { parseManifest } from "@ctxo/compiler/Manifest"
import type { Format } from "@ctxo/compiler/Render"
import type { OfferedTool, ToolSpec } from "@ctxo/compiler/ToolSelection"
import type { Workspace } from "@ctxo/compiler/Workspace"
import type {
  CompactionEvent,
  CompactionResult,
  CompactionSettings,
  CompactOptions,
  ShownHistory
} from "@ctxo/history/Compaction"
import { compact, triggerFor } from "@ctxo/history/Compaction"
import type { HistoryError, IdempotencyConflict } from "@ctxo/history/HistoryErrors"
import { fromStoreError, HistoryStore } from "@ctxo/history/HistoryStore"
import type { HistoryDocument, InputReference } from "@ctxo/history/Message"
import { emptyHistory, lastUsageOf, textOf } from "@ctxo/history/Message"
import { createReadTracker, type ReadTracker } from "@ctxo/history/ReadTracker"
import { endTurn, keyConflict, recordStep, recordToolResult, startTurn } from "@ctxo/history/Recorder"
import type { Summarizer } from "@ctxo/history/Summarizer"
import type { RawToolResult } from "@ctxo/history/ToolResultCompressor"
import { beginTurn, turnsOf, type Usage } from "@ctxo/history/Turns"
import { deferSync } from "@ctxo/store/HistorySync"
import { MANIFEST_FILE } from "@ctxo/store/Paths"
import * as SessionCache from "@ctxo/store/SessionCache"
import { annotateSpan, withSpan } from "@ctxo/store/Spans"
import { Store } from "@ctxo/store/Store"
import type { StoreError } from "@ctxo/store/StoreErrors"
import { Cause, Context, Effect, Either, Exit, Layer, Metric, Option, Schema } from "effect"
import { SessionNotActive } from "./Lifecycle.ts"
import { Memory } from "./Memory.ts"

// --- counters (Effect metrics, process-wide: the gateway's /metrics renders them)

/** Compactions that archived turns (with a summary, or the fallback without one). */
export const compactionsTotal = Metric.counter("ctxo_compactions_total", {
  description: "Compactions that archived turns (with a summary, or the fallback without one).",
  incremental: true
})
/** Turns refused because their input cannot fit the model's budget (`BudgetExceeded`). */
export const refusalsTotal = Metric.counter("ctxo_refusals_total", {
  description: "Turns refused because their input cannot fit the model's budget (BudgetExceeded).",
  incremental: true
})
const countRefusal = (error: unknown) =>
  typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "BudgetExceeded"
    ? Metric.increment(refusalsTotal)
    : Effect.void

// --- the seams

export interface CompilerService {
  readonly compile: (
    options: CompileOptions
  ) => Effect.Effect<CompileResult, CompileError, Workspace | ModelRegistry | Tokenizer>
}
/** The compiler a turn compiles with (the eval gate swaps in broken ones). */
export class ContextCompiler extends Context.Tag("@ctxo/agent/ContextCompiler")<
  ContextCompiler,
  CompilerService
>() {}
export const compilerLive: Layer.Layer<ContextCompiler> = Layer.succeed(ContextCompiler, { compile })

export interface CompactorService {
  readonly compact: (
    options: CompactOptions
  ) => Effect.Effect<CompactionResult, HistoryError, HistoryStore | Summarizer>
}
/** The compactor a turn compacts with (the eval gate swaps in broken ones). */
export class HistoryCompactor extends Context.Tag("@ctxo/agent/HistoryCompactor")<
  HistoryCompactor,
  CompactorService
>() {}
export const compactorLive: Layer.Layer<HistoryCompactor> = Layer.succeed(HistoryCompactor, { compact })

/** The live compiler and compactor. */
export const seamsLive: Layer.Layer<ContextCompiler | HistoryCompactor> = Layer.merge(
  compilerLive,
  compactorLive
)

// --- what a caller drives a turn with

export interface ToolCall {
  readonly id: string
  readonly name: string
  readonly arguments: string
}

/** What the model answered for one step. */
export interface ModelStep {
  readonly text: string
  readonly toolCalls: ReadonlyArray<ToolCall>
  readonly usage?: Usage
}

export type TurnEvent =
  | { readonly type: "turn"; readonly turn: number; readonly resumed: boolean }
  | {
      readonly type: "compaction-started"
      readonly archivedTurns: ReadonlyArray<number>
      readonly keptTurns: ReadonlyArray<number>
    }
  | {
      readonly type: "compaction-finished"
      readonly summaryId: string | null
      readonly archivedMessages: number
    }
  | { readonly type: "compaction-fell-back"; readonly message: string }
  | { readonly type: "text-delta"; readonly text: string }
  | { readonly type: "tool-call"; readonly id: string; readonly name: string; readonly arguments: string }
  | { readonly type: "tool-result"; readonly id: string; readonly name: string; readonly result: unknown }
  | { readonly type: "usage"; readonly inputTokens: number; readonly outputTokens: number }
  | { readonly type: "done"; readonly turn: number; readonly text: string; readonly steps: number }
  | { readonly type: "error"; readonly tag: string; readonly message: string }

export interface StepContext {
  readonly turn: number
  readonly step: number
  readonly model: ResolvedModel
  /** The manifest the turn compiles with (what the session allows its tools, among the rest). */
  readonly manifest: Manifest
  readonly emit: (event: TurnEvent) => Effect.Effect<void>
  /**
   * This step's request compiled again with other handed contexts (an orchestrator asking its
   * planner, then its reflector, within one step of the turn): the same history, manifest, tools
   * and model; nothing is recorded or remembered.
   */
  readonly recompile: (extras: CompileExtras) => Effect.Effect<CompileResult, CompileError>
}

/** Contexts a caller hands every compile of a turn (`CompileOptions.nodeContext`, `CompileOptions.meta`). */
export type CompileExtras = Pick<CompileOptions, "nodeContext" | "meta">

/**
 * The model and the tools of a turn. `runTool` absent: the client runs the tools (the
 * OpenAI-compatible endpoint), so a step that calls tools ends the request and the turn waits
 * for their results.
 */
export interface Driver<E = never, R = never> {
  readonly model: (compiled: CompileResult, context: StepContext) => Effect.Effect<ModelStep, E, R>
  readonly runTool?: (call: ToolCall, context: StepContext) => Effect.Effect<RawToolResult, E, R>
}

export interface TurnOptions {
  /** The model when neither the request nor the manifest names one. */
  readonly defaultModel: string
  /** Tool steps per turn. */
  readonly maxSteps: number
  readonly format?: Format
  /** Compaction settings (and the window it triggers on, default the model's). */
  readonly compaction?: Partial<CompactionSettings> & { readonly window?: number }
  /** The manifest to use instead of the session's context-config.json. */
  readonly manifest?: Manifest
  /** The tools the driver runs (sent on demand, counted: `CompileOptions.tools`). */
  readonly tools?: ReadonlyArray<OfferedTool>
  /** The client's own tools (all sent, counted: `CompileOptions.clientTools`). */
  readonly clientTools?: ReadonlyArray<ToolSpec>
  /** Contexts handed to every compile of the turn (a specialist's node context, a run's meta context). */
  readonly extras?: CompileExtras
  readonly emit?: (event: TurnEvent) => Effect.Effect<void>
  /** Each compile, as it happens (replay measures them). */
  readonly onCompiled?: (
    compiled: CompileResult,
    at: { readonly turn: number; readonly step: number; readonly options: CompileOptions }
  ) => Effect.Effect<void>
  /** Each compaction that did something. */
  readonly onCompaction?: (
    result: CompactionResult,
    before: HistoryDocument,
    after: HistoryDocument
  ) => Effect.Effect<void>
}

export interface PreviewRequest {
  readonly sessionId: string
  /** The next input (default: the manifest's query). */
  readonly input?: string
  readonly references?: ReadonlyArray<InputReference>
  readonly model?: string
  /** The model when neither `model` nor the manifest names one. */
  readonly defaultModel: string
  readonly format?: Format
  /** For a model call that records nothing: refused like a turn when the session is not active. */
  readonly dryRun?: boolean
  /** The tools a turn would offer (`TurnOptions.tools`, `TurnOptions.clientTools`). */
  readonly tools?: ReadonlyArray<OfferedTool>
  readonly clientTools?: ReadonlyArray<ToolSpec>
}

export interface TurnRequest {
  readonly sessionId: string
  readonly input: string
  readonly references?: ReadonlyArray<InputReference>
  readonly idempotencyKey?: string
  readonly model?: string
  /** The thinking-map node the input is about: the turn joins that node's conversation. */
  readonly node?: string
}

export interface ToolResultInput {
  readonly callId: string
  readonly result: RawToolResult
}

export type TurnOutcome =
  /** The turn ended with an answer (now, or before: a retry of a finished turn). */
  | {
      readonly _tag: "Answered"
      readonly turn: number
      readonly text: string
      readonly steps: number
      readonly replayed: boolean
      /** The turn ran out of tool steps: its text says so, the model gave no answer. */
      readonly stopped?: boolean
      readonly compiled?: CompileResult
      readonly usage?: Usage
    }
  /** The model called tools the client runs: the turn waits for their results. */
  | {
      readonly _tag: "ToolCalls"
      readonly turn: number
      readonly text: string
      readonly toolCalls: ReadonlyArray<ToolCall>
      readonly compiled: CompileResult
      readonly usage?: Usage
    }

export type TurnError =
  | CompileError
  | HistoryError
  | IdempotencyConflict
  | StoreError
  | InvalidToolResults
  | SessionNotActive

/** Tool results that answer no call of the session's running turn (or there is none running). */
export class InvalidToolResults extends Schema.TaggedError<InvalidToolResults>(
  "@ctxo/agent/InvalidToolResults"
)("InvalidToolResults", { reason: Schema.String }) {
  override get message() {
    return this.reason
  }
}

/** The tools and handed contexts of a turn's compiles. */
const toolsOf = (options: TurnOptions) => ({
  ...(options.tools === undefined ? {} : { tools: options.tools }),
  ...(options.clientTools === undefined ? {} : { clientTools: options.clientTools }),
  ...options.extras
})

// --- per-session state: bounded, evicted when idle

interface SessionState {
  readonly tracker: ReadTracker
  touched: number
}
/** A session's last compile, kept for its next one (for the most recently used sessions only). */
interface LastCompile {
  compileState: CompileState | undefined
  /**
   * The history as this engine left it at the end of its last turn: the compile state is kept only
   * while the history is still that document (another process, a replica on the same database,
   * may have run turns of the session since).
   */
  seen: HistoryDocument | undefined
}
export interface EngineOptions {
  /** Sessions whose state is kept (least recently used beyond it is dropped; default 10,000). */
  readonly maxSessions?: number
  /**
   * Sessions whose last compile (and the history it was made from) is kept for the next one, the
   * most recently used (default 256, as many as the history store keeps decoded). Another session's
   * next compile starts afresh: the same request, made whole. A compile state holds the session's
   * whole compiled context, so this bounds the engine's memory by its busiest sessions.
   */
  readonly maxCompiledSessions?: number
  /** State of a session idle this long is dropped (default 30 minutes). */
  readonly idleMs?: number
}

export interface Service {
  /** A new input: the whole turn (with `driver.runTool`), or up to the first tool calls (without). */
  readonly turn: <E, R>(
    request: TurnRequest,
    driver: Driver<E, R>,
    options: TurnOptions
  ) => Effect.Effect<TurnOutcome, TurnError | E, R>
  /** Results of the tool calls the model made in the session's running turn: the turn goes on. */
  readonly continueTurn: <E, R>(
    request: {
      readonly sessionId: string
      readonly model?: string
      readonly results: ReadonlyArray<ToolResultInput>
    },
    driver: Driver<E, R>,
    options: TurnOptions
  ) => Effect.Effect<TurnOutcome, TurnError | E, R>
  /**
   * The request the session's next turn would send first, compiled as that turn compiles it (the
   * session's manifest and files, its last history cut, the engine's compiler and cache), under the
   * session's lock, so it waits for a running turn. Nothing is recorded, archived or remembered.
   * Two steps of a turn are not taken: it does not compact (a session over its trigger shows its
   * history as it is; the turn compacts first) and an input that cannot fit is the compile's
   * BudgetExceeded. Without `input`: the manifest's query. The gateway's context preview, `/v1`
   * requests that record nothing, and `ctxo compile` / `ctxo preview`.
   */
  readonly preview: (request: PreviewRequest) => Effect.Effect<CompileResult, TurnError>
  /** The session's read tracker (the read tool notes files changed since the model read them). */
  readonly tracker: (sessionId: string) => Effect.Effect<ReadTracker>
  /** Sessions with state held now (bounded). */
  readonly sessions: () => number
  /** Sessions whose last compile is kept now for their next one (bounded by `maxCompiledSessions`). */
  readonly compiledSessions: () => number
  /** Forgets a session's state (its history was replaced, e.g. restored from a checkpoint). */
  readonly reset: (sessionId: string) => Effect.Effect<void>
}

export class TurnEngine extends Context.Tag("@ctxo/agent/TurnEngine")<TurnEngine, Service>() {}

type Needs =
  | Store
  | HistoryStore
  | Summarizer
  | Workspace
  | ModelRegistry
  | Tokenizer
  | ContextCompiler
  | HistoryCompactor

/** One turn's steps (`steps`): the turn, its session's manifest and model, the driver, and around it. */
interface StepsRun<E, R> {
  readonly sessionId: string
  readonly turn: number
  readonly manifest: Manifest
  readonly model: ResolvedModel
  readonly modelName: string
  readonly driver: Driver<E, R>
  readonly options: TurnOptions
  /** Tells the lock the history the turn's answer left (it reads it otherwise). */
  readonly leave: (doc: HistoryDocument) => void
  /**
   * Run once, after the first step's compile whatever its outcome and before anything else (a
   * model call, the end of the turn), or when the turn fails before it.
   */
  readonly beforeFirstWord?: Effect.Effect<void, TurnError>
  /**
   * When the turn's input was recorded without the required compile's check (see `turn`): takes
   * it back out of history. A first compile that fails runs it, and the turn fails as the check
   * would have failed it, having said nothing.
   */
  readonly undoInput?: Effect.Effect<void, TurnError> | undefined
  /** The history as the turn's input left it (the first step compiles it instead of reading it again). */
  readonly started?: HistoryDocument
}

export const makeWith = (engineOptions: EngineOptions = {}) =>
  Effect.gen(function* () {
    const MAX_SESSIONS = engineOptions.maxSessions ?? 10_000
    const MAX_COMPILED = engineOptions.maxCompiledSessions ?? 256
    const IDLE_MS = engineOptions.idleMs ?? 30 * 60_000
    const context = yield* Effect.context<Needs>()
    const store = Context.get(context, Store)
    const history = Context.get(context, HistoryStore)
    const registry = Context.get(context, ModelRegistry)
    const tokenizer = Context.get(context, Tokenizer)
    const compiler = Context.get(context, ContextCompiler)
    const compactor = Context.get(context, HistoryCompactor)
    // The compile cache: the context's (a gateway's, one per process), else the engine's own, so
    // each step's compile reuses the work of the previous ones.
    const compileCache = Option.getOrElse(
      yield* Effect.serviceOption(CompileCache.CompileCache),
      CompileCache.make
    )

    // Memory levels, when the context has them: each compile may draw on the session's L2 and the
    // root's L3 and L4, and a finished turn that matters is promoted to L2. A memory that cannot be
    // read is said in the log; the turn goes on without it.
    const memory = yield* Effect.serviceOption(Memory)
    const memoryOf = (sessionId: string) =>
      Option.isNone(memory)
        ? Effect.succeed({})
        : memory.value.sources(sessionId).pipe(
            Effect.map((items) => (items.length === 0 ? {} : { memory: items })),
            Effect.catchAll((e) =>
              Effect.as(Effect.logWarning(`memory of session ${sessionId} left out: ${e.message}`), {})
            )
          )
    /** The wait for a history change `deferSync` handed back, failing as the history's write. */
    const onDisk = (sessionId: string, synced: Effect.Effect<void, StoreError>) =>
      Effect.mapError(synced, fromStoreError(sessionId, "write"))
    /** `doc`: the session's history as the turn's answer left it. */
    const promote = (sessionId: string, doc: HistoryDocument, durable?: Effect.Effect<void, StoreError>) =>
      Option.isNone(memory)
        ? Effect.void
        : memory.value.sync(sessionId, doc, { beforeWrite: durable }).pipe(
            Effect.asVoid,
            Effect.catchAll((e) =>
              Effect.logWarning(`memory of session ${sessionId} not promoted: ${e.message}`)
            )
          )

    const states = new Map<string, SessionState>()
    // The last compiles, in the store's session cache (its budget of bytes), at most MAX_COMPILED
    // (a compile state holds the session's whole compiled context; the read trackers above are small).
    const lastCompiles = store.cache.holder<LastCompile>("engine last compile", {
      maxEntries: MAX_COMPILED
    })
    // Keyed by the store's scope (a tenant's data root) and the session: tenants never share state.
    const keyOf = (sessionId: string) =>
      Effect.map(store.scope, (scope) => SessionCache.keyOf(scope, sessionId))
    const stateOf = (sessionId: string) => Effect.map(keyOf(sessionId), (key) => stateAt(key))
    const stateAt = (key: string): SessionState => {
      const now = Date.now()
      let state = states.get(key)
      if (state !== undefined) states.delete(key)
      else {
        state = { tracker: createReadTracker(), touched: now }
        // Least recently used first: drop the idle ones, and any beyond the bound.
        for (const [k, s] of states) {
          if (now - s.touched < IDLE_MS && states.size < MAX_SESSIONS) break
          states.delete(k)
          lastCompiles.delete(k)
        }
      }
      state.touched = now
      states.set(key, state)
      return state
    }
    /** The session's last compile (its state touched too), now the most recently used. */
    const lastCompileOf = (sessionId: string) =>
      Effect.map(keyOf(sessionId), (key) => {
        stateAt(key)
        let last = lastCompiles.get(key)
        if (last === undefined) {
          last = { compileState: undefined, seen: undefined }
          lastCompiles.set(key, last)
        }
        return last
      })

    /** The session's manifest, parsed once per text. */
    const manifestRead = Effect.fnUntraced(function* (sessionId: string) {
      const text = yield* store.read("session", sessionId, MANIFEST_FILE)
      const file = `${sessionId}/${MANIFEST_FILE}`
      // Parsed once per text, in the compile cache (the store hands back the same text while
      // the file is unchanged).
      const parsed =
        text === undefined
          ? noManifest
          : compileCache.manifest(
              CompileCache.fileKey(yield* store.scope, sessionId, MANIFEST_FILE),
              text,
              file
            )
      return yield* Either.match(parsed, { onLeft: Effect.fail, onRight: Effect.succeed })
    })
    const manifestOf = (sessionId: string, options: TurnOptions) =>
      options.manifest !== undefined ? Effect.succeed(options.manifest) : manifestRead(sessionId)

    /** Turns run in active sessions only (checked under the session's lock: a pause waits for the turn). */
    const requireActive = (sessionId: string) =>
      Effect.flatMap(store.getSession(sessionId), (record) =>
        record.state === "active"
          ? Effect.void
          : Effect.fail(new SessionNotActive({ sessionId, state: record.state, operation: "take a turn" }))
      )

    const compileContext = Context.add(context, CompileCache.CompileCache, compileCache)
    const provide = <A, E>(effect: Effect.Effect<A, E, Needs>) => Effect.provide(effect, compileContext)

    /** One tool step of `stepping` (its call, run and result), recorded whole or not at all by the caller. */
    function* toolStep<E, R>(
      sessionId: string,
      turn: number,
      first: boolean,
      answer: ModelStep,
      call: ToolCall,
      runTool: Driver<E, R>["runTool"],
      context: StepContext,
      emit: (event: TurnEvent) => Effect.Effect<void>
    ) {
      yield* provide(
        recordStep(sessionId, turn, {
          ...(first && answer.text !== "" ? { text: answer.text } : {}),
          ...(first && answer.usage !== undefined ? { usage: answer.usage } : {}),
          toolCall: { callId: call.id, name: call.name, input: parseArguments(call.arguments) }
        })
      )
      yield* emit({ type: "tool-call", id: call.id, name: call.name, arguments: call.arguments })
      if (runTool === undefined) return
      const result = yield* runTool(call, context)
      yield* provide(recordToolResult(sessionId, turn, { callId: call.id, name: call.name }, result))
      yield* emit({ type: "tool-result", id: call.id, name: call.name, result })
    }

    /** `steps`' work; `undo.done` once the input was taken back out. */
    function* stepping<E, R>(
      run: StepsRun<E, R>,
      announce: Effect.Effect<void, TurnError>,
      undo: { done: boolean }
    ) {
      const { sessionId, turn, manifest, model, modelName, driver, options, leave, undoInput, started } = run
      const last = yield* lastCompileOf(sessionId)
      const emit = options.emit ?? (() => Effect.void)
      for (let step = 1; step <= options.maxSteps; step++) {
        const doc = step === 1 && started !== undefined ? started : yield* history.load(sessionId)
        const compileOptions: CompileOptions = {
          sessionId,
          manifest,
          model: modelName,
          format: options.format ?? "openai",
          history: doc,
          query: "",
          ...toolsOf(options),
          ...(yield* memoryOf(sessionId)),
          ...(last.compileState === undefined ? {} : { previous: last.compileState })
        }
        const compiledExit = yield* Effect.exit(provide(compiler.compile(compileOptions)))
        if (
          step === 1 &&
          undoInput !== undefined &&
          Exit.isFailure(compiledExit) &&
          !Cause.isInterruptedOnly(compiledExit.cause)
        ) {
          undo.done = true
          // Whole or not at all; a history that cannot be written back is said in the log, and
          // the turn still fails as its compile did (the input then stays, an unfinished turn
          // the next input closes).
          yield* Effect.uninterruptible(undoInput).pipe(
            Effect.catchAllCause((cause) =>
              Effect.logWarning(
                `session ${sessionId}: turn ${turn}'s input, refused by its first compile, could not be taken back out`,
                cause
              )
            )
          )
          return yield* Effect.failCause(compiledExit.cause)
        }
        if (step === 1) yield* announce
        const compiled = yield* compiledExit
        last.compileState = compiled.state
        if (options.onCompiled) yield* options.onCompiled(compiled, { turn, step, options: compileOptions })
        const context: StepContext = {
          turn,
          step,
          model,
          manifest,
          emit,
          recompile: (extras) => provide(compiler.compile({ ...compileOptions, ...extras }))
        }
        const answer = yield* driver.model(compiled, context)
        if (answer.usage !== undefined) yield* emit({ type: "usage", ...answer.usage })
        if (answer.toolCalls.length === 0) {
          // The answer is written, and memory's promotion checked while the disk syncs it (an
          // entry, when the turn is due, written once it is synced): on disk before the turn
          // says it is done.
          const ended = yield* deferSync(
            provide(endTurn(sessionId, turn, answer.text, answer.usage)),
            (ended, synced, pending) =>
              Effect.as(
                Effect.zipRight(
                  promote(sessionId, ended.doc, pending ? synced : undefined),
                  onDisk(sessionId, synced)
                ),
                ended
              )
          )
          leave(ended.doc)
          yield* emit({ type: "done", turn, text: answer.text, steps: step - 1 })
          return {
            _tag: "Answered",
            turn,
            text: answer.text,
            steps: step - 1,
            replayed: false,
            compiled,
            ...(answer.usage === undefined ? {} : { usage: answer.usage })
          } as const
        }
        const runTool = driver.runTool
        for (const [i, call] of answer.toolCalls.entries()) {
          // A tool step (its call, run and result) is recorded whole or not at all: an
          // interruption (a client gone, shutdown) waits for it.
          yield* Effect.uninterruptible(
            Effect.gen(() => toolStep(sessionId, turn, i === 0, answer, call, runTool, context, emit))
          )
        }
        if (runTool === undefined)
          return {
            _tag: "ToolCalls",
            turn,
            text: answer.text,
            toolCalls: answer.toolCalls,
            compiled,
            ...(answer.usage === undefined ? {} : { usage: answer.usage })
          } as const
      }
      yield* announce
      const text = `Stopped after ${options.maxSteps} tool steps.`
      leave((yield* provide(endTurn(sessionId, turn, text))).doc)
      yield* emit({ type: "done", turn, text, steps: options.maxSteps })
      return {
        _tag: "Answered",
        turn,
        text,
        steps: options.maxSteps,
        replayed: false,
        stopped: true
      } as const
    }

    /** Compile, model, record; tools and again, until an answer, tool calls for the client, or the limit. */
    const steps = <E, R>(run: StepsRun<E, R>): Effect.Effect<TurnOutcome, TurnError | E, R> =>
      Effect.flatMap(Effect.cached(run.beforeFirstWord ?? Effect.void), (announce) => {
        const undo = { done: false }
        return Effect.gen(() => stepping(run, announce, undo)).pipe(
          Effect.onError(() => (undo.done ? Effect.void : Effect.ignore(announce)))
        )
      })

    /**
     * A turn of `sessionId` under its lock, traced as `span`: the compile state is kept only while
     * the history is what this engine left at the end of its last turn (not changed elsewhere
     * meanwhile, e.g. by a replica on the same database), and noted again when the turn ends.
     */
    const underLock = <A, E, R>(
      span: string,
      sessionId: string,
      /**
       * Given the history as the lock found it (read once: nobody in this process changes it
       * meanwhile), and where to leave the history its answer's record ends (read again when the
       * turn ends otherwise: a failure, tool calls handed to the client).
       */
      effect: (
        loaded: Effect.Effect<HistoryDocument, HistoryError>,
        leave: (doc: HistoryDocument) => void
      ) => Effect.Effect<A, E, R>
    ) =>
      store
        .withSessionLock(
          sessionId,
          Effect.gen(() => locked(sessionId, effect))
        )
        .pipe(withSpan(span, { attributes: { "ctxo.session": sessionId } }))

    // A turn's work runs generators made once per engine (`Effect.fnUntraced`, or these functions
    // for the generic ones), not one per call: V8 gives a generator function made per call a hidden
    // class of its own in the old space, which holds what it closes over (the request, the history)
    // until a full collection (docs/hot-path.md, the nineteenth round; `test/HotPath.test.ts`).
    function* locked<A, E, R>(
      sessionId: string,
      effect: (
        loaded: Effect.Effect<HistoryDocument, HistoryError>,
        leave: (doc: HistoryDocument) => void
      ) => Effect.Effect<A, E, R>
    ) {
      const last = yield* lastCompileOf(sessionId)
      const now = yield* Effect.either(history.load(sessionId))
      if (Either.isLeft(now) || now.right !== last.seen) last.compileState = undefined
      let left: HistoryDocument | undefined
      return yield* Effect.ensuring(
        effect(now, (doc) => {
          left = doc
        }),
        Effect.suspend(() =>
          Effect.map(
            left === undefined ? Effect.either(history.load(sessionId)) : Effect.succeed(Either.right(left)),
            (doc) => {
              last.seen = Either.getOrUndefined(doc)
            }
          )
        )
      )
    }
    function* turning<E, R>(
      request: TurnRequest,
      driver: Driver<E, R>,
      options: TurnOptions,
      loaded: Effect.Effect<HistoryDocument, HistoryError>,
      leave: (doc: HistoryDocument) => void
    ) {
      const sid = request.sessionId
      const { manifest, modelName, model } = yield* opening(request, options)
      const emit = options.emit ?? (() => Effect.void)
      const before = yield* loaded
      const began = {
        input: request.input,
        ...(request.idempotencyKey === undefined ? {} : { inputKey: request.idempotencyKey }),
        ...(request.references === undefined ? {} : { references: request.references }),
        ...(request.node === undefined ? {} : { node: request.node })
      }
      const conflict = keyConflict(before, began)
      if (conflict !== undefined) return yield* Effect.fail(conflict)
      // A retry of a turn: the same key, or the same text while the last turn is unfinished.
      const probe = beginTurn(before, began)
      if (probe.resumed && probe.finished) {
        const answer = before.messages.find((m) => m.meta.turn === probe.turn && m.meta.kind === "final")
        const text = answer === undefined ? "" : textOf(answer)
        yield* emit({ type: "turn", turn: probe.turn, resumed: true })
        yield* emit({ type: "done", turn: probe.turn, text, steps: 0 })
        return { _tag: "Answered", turn: probe.turn, text, steps: 0, replayed: true } as const
      }
      // An input that cannot fit with what every compile must carry (the system prompt, the
      // rules, the pinned turns, which compaction never archives) is refused before anything
      // is archived or recorded. The required compile that checks it also tells compaction
      // what the turn's requests carry besides history; when compaction will not run (the
      // trigger, as the compactor judges it, is not reached), with no references and nothing
      // pinned, the turn's first compile checks instead: the input is recorded, and taken
      // out again when that compile fails, before the turn says anything (`undoInput`).
      const window = options.compaction?.window ?? model.contextWindow
      const checkedByFirstCompile =
        !probe.resumed &&
        // A session with history (a first input is checked apart: nothing of the session is
        // written for a refused one), and an input not longer in characters than the window
        // is in tokens (a longer one is most likely refused: checked before it is written).
        before.messages.length > 0 &&
        request.input.length <= model.contextWindow &&
        (request.references === undefined || request.references.length === 0) &&
        !hasPinned(before) &&
        // The compactor's own decision, on the same history and usage it is given below.
        !triggerFor(before, {
          lastUsage: lastUsageOf(before),
          input: request.input,
          window,
          ...(options.compaction === undefined ? {} : { settings: options.compaction })
        }).trigger
      if (!probe.resumed) {
        const required = checkedByFirstCompile
          ? undefined
          : yield* provide(
              compiler.compile({
                sessionId: sid,
                manifest,
                model: modelName,
                format: options.format ?? "openai",
                history: requiredHistoryOf(before),
                query: request.input,
                ...toolsOf(options),
                ...(request.references === undefined ? {} : { references: request.references })
              })
            )
        const counter = yield* tokenizer.counter(model)
        // History as the turn's requests carry it: in their format, framing included.
        const countHistory = historyTokens(counter, options.format ?? "openai")
        const compaction = yield* provide(
          compactor.compact({
            sessionId: sid,
            input: request.input,
            lastUsage: lastUsageOf(before),
            model: { id: model.id, contextWindow: window },
            ...(options.compaction === undefined ? {} : { settings: options.compaction }),
            count: counter.count,
            countHistory,
            // What the turn's requests carry besides the history compaction plans (pinned turns
            // are history, the plan counts them): the required request without its history (the
            // system prompt, rules, contexts, the input with its reminder, tools, framing). What
            // is kept, with the summary's room, stays under the trigger. (Not made when the
            // trigger is not reached: the compactor reads it only to plan a compaction.)
            ...(required === undefined ? {} : { fixedTokens: fixedTokensOf(required, countHistory) }),
            // Read under this lock a moment ago; nothing in this process wrote since.
            history: before,
            onEvent: (event) => compactionEvent(event, emit)
          })
        )
        if (compaction.status === "compacted" || compaction.status === "fell-back")
          yield* Metric.increment(compactionsTotal)
        if (compaction.status !== "not-needed" && options.onCompaction)
          yield* options.onCompaction(compaction, before, yield* history.load(sid))
      }
      // The input is written, and its first request compiled while the disk syncs it: it is on
      // disk before the turn says anything (its number, a model call, an error).
      return yield* deferSync(provide(startTurn(sid, began)), (started, synced, pending) => {
        const announce = Effect.zipRight(
          onDisk(sid, synced),
          Effect.zipRight(
            emit({ type: "turn", turn: started.turn, resumed: started.resumed }),
            annotateSpan({ "ctxo.turn": started.turn })
          )
        )
        // Unchecked, the input is taken back out when the first compile fails: history as before.
        const undoInput =
          checkedByFirstCompile && !started.resumed
            ? provide(history.modify(sid, () => Effect.succeed([undefined, before] as const)))
            : undefined
        const run = (beforeFirstWord: Effect.Effect<void, TurnError>) =>
          steps({
            sessionId: sid,
            turn: started.turn,
            manifest,
            model,
            modelName,
            driver,
            options,
            leave,
            beforeFirstWord,
            undoInput,
            started: started.doc
          })
        // Nothing to wait for (a store durable when a change returns): the number at once,
        // unless the first compile is the input's check.
        return pending || undoInput !== undefined
          ? run(announce)
          : Effect.zipRight(announce, run(Effect.void))
      })
    }
    function* continuing<E, R>(
      request: Parameters<Service["continueTurn"]>[0],
      driver: Driver<E, R>,
      options: TurnOptions,
      loaded: Effect.Effect<HistoryDocument, HistoryError>,
      leave: (doc: HistoryDocument) => void
    ) {
      const sid = request.sessionId
      const { manifest, modelName, model } = yield* opening(request, options)
      const doc = yield* loaded
      const running = turnsOf(doc.messages).at(-1)
      const calls = new Map<string, string>()
      const answered = new Set<string>()
      for (const m of running?.messages ?? [])
        for (const p of m.parts) {
          if (p._tag === "tool-call") calls.set(p.callId, p.name)
          if (p._tag === "tool-result") answered.add(p.callId)
        }
      if (running === undefined || running.finished)
        return yield* Effect.fail(
          new InvalidToolResults({ reason: "the session has no turn waiting for tool results" })
        )
      for (const r of request.results) {
        const name = calls.get(r.callId)
        if (name === undefined)
          return yield* Effect.fail(
            new InvalidToolResults({
              reason: `tool result ${r.callId.slice(0, 120)} answers no tool call of the running turn`
            })
          )
        if (answered.has(r.callId)) continue
        yield* provide(recordToolResult(sid, running.turn, { callId: r.callId, name }, r.result))
        answered.add(r.callId)
      }
      return yield* steps({
        sessionId: sid,
        turn: running.turn,
        manifest,
        model,
        modelName,
        driver,
        options,
        leave
      })
    }
    const previewing = Effect.fnUntraced(function* (request: PreviewRequest) {
      if (request.dryRun === true) yield* requireActive(request.sessionId)
      // The session's last cut when the engine holds one for this history; a preview adds no
      // state of its own.
      const held = lastCompiles.get(yield* keyOf(request.sessionId))
      const doc = yield* history.load(request.sessionId)
      const previous = held !== undefined && held.seen === doc ? held.compileState : undefined
      return yield* provide(
        compiler.compile({
          sessionId: request.sessionId,
          history: doc,
          defaultModel: request.defaultModel,
          ...(request.model === undefined ? {} : { model: request.model }),
          ...(request.format === undefined ? {} : { format: request.format }),
          ...(request.input === undefined ? {} : { query: request.input }),
          ...(request.references === undefined ? {} : { references: request.references }),
          ...(request.tools === undefined ? {} : { tools: request.tools }),
          ...(request.clientTools === undefined ? {} : { clientTools: request.clientTools }),
          ...(yield* memoryOf(request.sessionId)),
          ...(previous === undefined ? {} : { previous })
        })
      )
    })

    const resolveModel = (request: { readonly model?: string }, manifest: Manifest, options: TurnOptions) => {
      const name = request.model ?? manifest.model ?? options.defaultModel
      return Effect.map(registry.resolve(name), (model) => ({ name, model }))
    }

    /**
     * What a turn and a turn continued with the client's tool results start with, under the
     * session's lock: the session active, its manifest, the model (named on the turn's span).
     */
    const opening = Effect.fnUntraced(function* (
      request: { readonly sessionId: string; readonly model?: string },
      options: TurnOptions
    ) {
      yield* requireActive(request.sessionId)
      const manifest = yield* manifestOf(request.sessionId, options)
      const { name: modelName, model } = yield* resolveModel(request, manifest, options)
      yield* annotateSpan({ "ctxo.model": modelName })
      return { manifest, modelName, model }
    })

    const turn: Service["turn"] = (request, driver, options) =>
      underLock("TurnEngine.turn", request.sessionId, (loaded, leave) =>
        Effect.gen(() => turning(request, driver, options, loaded, leave))
      )

    const continueTurn: Service["continueTurn"] = (request, driver, options) =>
      underLock("TurnEngine.continueTurn", request.sessionId, (loaded, leave) =>
        Effect.gen(() => continuing(request, driver, options, loaded, leave))
      )

    const preview: Service["preview"] = (request) =>
      store.withSessionLock(request.sessionId, previewing(request))

    return {
      preview,
      turn: (request, driver, options) => Effect.tapError(turn(request, driver, options), countRefusal),
      continueTurn: (request, driver, options) =>
        Effect.tapError(continueTurn(request, driver, options), countRefusal),
      tracker: (sessionId) => Effect.map(stateOf(sessionId), (state) => state.tracker),
      sessions: () => states.size,
      compiledSessions: () => lastCompiles.size(),
      reset: (sessionId) =>
        Effect.map(keyOf(sessionId), (key) => {
          states.delete(key)
          lastCompiles.delete(key)
        })
    } satisfies Service
  })

export const make = makeWith()

export const layer: Layer.Layer<TurnEngine, never, Needs> = Layer.effect(TurnEngine, make)

/** The manifest of a session without context-config.json (the defaults). */
const noManifest = parseManifest("{}")

/** Tokens of a compiled request besides its history (summaries and turns). */
const fixedTokensOf = (compiled: CompileResult, countHistory: (history: ShownHistory) => number): number => {
  const layers = compiled.composition.layers
  if (compiled.report.total === undefined)
    return compiled.layers
      .filter((l) => l.id !== "checkpoint_messages" && l.id !== "compression__context")
      .reduce((n, l) => n + l.tokens, 0)
  return (
    compiled.report.total -
    countHistory({
      summaries: layers.flatMap((l) =>
        l._tag === "system" && l.id === "compression__context" ? [l.text] : []
      ),
      messages: layers.flatMap((l) => (l._tag === "history" ? l.messages : []))
    })
  )
}

/** Whether the history pins anything (most pin nothing). */
const hasPinned = (doc: HistoryDocument) => doc.messages.some((m) => m.meta.pinned === true)

/** The part of a history every compile must show: its pinned turns (no summary, nothing else). */
const requiredHistoryOf = (doc: HistoryDocument): HistoryDocument => ({
  ...emptyHistory,
  // Most histories pin nothing: then no turn is grouped.
  messages: hasPinned(doc)
    ? turnsOf(doc.messages)
        .filter((t) => t.finished && t.messages.some((m) => m.meta.pinned === true))
        .flatMap((t) => t.messages)
    : []
})

const parseArguments = (text: string): unknown => {
  try {
    return JSON.parse(text === "" ? "{}" : text)
  } catch {
    return { raw: text }
  }
}

const compactionEvent = (event: CompactionEvent, emit: (event: TurnEvent) => Effect.Effect<void>) =>
  event._tag === "Started"
    ? emit({ type: "compaction-started", archivedTurns: event.archivedTurns, keptTurns: event.keptTurns })
    : event._tag === "Finished"
      ? emit({
          type: "compaction-finished",
          summaryId: event.summaryId ?? null,
          archivedMessages: event.archivedMessages
        })
      : event._tag === "FellBack"
        ? emit({ type: "compaction-fell-back", message: event.message })
        : Effect.void
