/**
 * Replays a recorded session turn by turn for one model profile, through the same pieces the
 * gateway uses: the history recorder (inputs, steps, compressed tool results), compaction before
 * each turn, and the compiler at the turn's input and after every tool result. Every compiled
 * request is measured for the invariants (`Invariants.observe`); nothing here judges.
 *
 * The compiler and the compactor are services (`ContextCompiler`, `HistoryCompactor`), so a test
 * can swap in a broken one and see the checks catch it.
 */

import * as TurnEngine from "@ctxo/agent/TurnEngine"
import { ContextCompiler, HistoryCompactor, seamsLive } from "@ctxo/agent/TurnEngine"
import { ModelRegistry } from "@ctxo/budget/ModelRegistry"
import type { Counter } from "@ctxo/budget/Tokenizer"
import { Tokenizer } from "@ctxo/budget/Tokenizer"
import { type CompileError, type CompileResult, chatMessagesOf } from "@ctxo/compiler/Compile"
import * as CompileCache from "@ctxo/compiler/CompileCache"
import { parseManifest } from "@ctxo/compiler/Manifest"
import type { Format } from "@ctxo/compiler/Render"
import * as Workspace from "@ctxo/compiler/Workspace"
import type { HistoryError } from "@ctxo/history/HistoryErrors"
import * as HistoryStore from "@ctxo/history/HistoryStore"
import { dismissMemory, excludeMessage, pinMessage } from "@ctxo/history/HistoryView"
import type { HistoryDocument, Message } from "@ctxo/history/Message"
import { emptyHistory } from "@ctxo/history/Message"
import { deterministicSummary, Summarizer } from "@ctxo/history/Summarizer"
import type { RawToolResult } from "@ctxo/history/ToolResultCompressor"
import * as MemoryStore from "@ctxo/store/MemoryStore"
import { Store } from "@ctxo/store/Store"
import { Clock, Effect, Either, Layer } from "effect"
import type {
  CompactionEvidence,
  FailureEvidence,
  PointEvidence,
  ReplayEvidence,
  Where
} from "./Invariants.ts"
import { expectedRules, observe, observeCompaction, requiredMinimum } from "./Invariants.ts"
import type { RecordedSession, Step } from "./Session.ts"
import { InvalidSession } from "./Session.ts"

/** A model to replay for: a registry name and the provider format to render. */
export interface Profile {
  readonly id: string
  readonly model: string
  readonly format: Format
}

/** gpt-4o (128k), gpt-4 (its 8k window), a Claude model (Anthropic format) and a 16k model. */
export const defaultProfiles: ReadonlyArray<Profile> = [
  { id: "gpt-4o", model: "openai/gpt-4o", format: "openai" },
  { id: "gpt-4", model: "openai/gpt-4", format: "openai" },
  { id: "claude-sonnet-4-5", model: "anthropic/claude-sonnet-4-5", format: "anthropic" },
  { id: "gpt-3.5-turbo", model: "openai/gpt-3.5-turbo", format: "openai" }
]

export const DEFAULT_WINDOW = 200_000

/** The turn engine's seams (compiler and compactor), swapped by the eval gate's breakers. */
export {
  type CompactorService,
  type CompilerService,
  ContextCompiler,
  compactorLive,
  compilerLive,
  HistoryCompactor
} from "@ctxo/agent/TurnEngine"

/** The live compiler and compactor (the budget services come from the caller). */
export const live: Layer.Layer<ContextCompiler | HistoryCompactor> = seamsLive

/** The manifest a session compiles with: its policy and model, its system prompt and contexts. */
const manifestOf = (session: RecordedSession, profile: Profile) =>
  parseManifest(
    JSON.stringify({
      policy: session.policy,
      model: profile.model,
      systemPrompt: [{ type: "global", file: "system-prompt.md" }],
      sources: session.contexts ?? {},
      ...session.manifest
    }),
    `${session.id} (manifest)`
  )

/** Tool steps as history records them: words with the call they announce, results, the final answer. */
export interface Planned {
  readonly kind: "step" | "result" | "final"
  readonly text?: string
  readonly call?: { readonly callId: string; readonly name: string; readonly input: unknown }
  readonly result?: Extract<Step, { type: "tool_result" }>
}
/**
 * The model's answer the plan holds at `from`: the words of the first step and the tool calls of
 * the steps that follow it together, stopping before a step `stop` names once a call is taken;
 * and where the plan goes on.
 */
export const modelStepAt = (
  plan: ReadonlyArray<Planned>,
  from: number,
  stop: (at: number) => boolean = () => false
): { readonly text: string; readonly toolCalls: Array<TurnEngine.ToolCall>; readonly next: number } => {
  const toolCalls: Array<TurnEngine.ToolCall> = []
  let text = ""
  let next = from
  while (plan[next]?.kind === "step" && !(toolCalls.length > 0 && stop(next))) {
    const step = plan[next]!
    if (toolCalls.length === 0) text = step.text ?? ""
    if (step.call !== undefined)
      toolCalls.push({
        id: step.call.callId,
        name: step.call.name,
        arguments: JSON.stringify(step.call.input ?? {})
      })
    next++
  }
  return { text, toolCalls, next }
}

export const planSteps = (steps: ReadonlyArray<Step>): Array<Planned> => {
  const out: Array<Planned> = []
  for (let i = 0; i < steps.length; i++) {
    const s = steps[i]!
    if (s.type === "assistant") {
      const next = steps[i + 1]
      if (next?.type === "tool_call") {
        out.push({
          kind: "step",
          text: s.text,
          call: { callId: next.id, name: next.name, input: next.input }
        })
        i++
      } else if (i === steps.length - 1) out.push({ kind: "final", text: s.text })
      else out.push({ kind: "step", text: s.text })
    } else if (s.type === "tool_call") {
      out.push({ kind: "step", call: { callId: s.id, name: s.name, input: s.input } })
    } else out.push({ kind: "result", result: s })
  }
  return out
}

export interface ReplayOptions {
  /** Called after each turn (progress). */
  readonly onTurn?: (turn: number, of: number) => Effect.Effect<void>
  /** Called with each compiled request (the `--dump` writer). */
  readonly onCompiled?: (where: Where, result: CompileResult, window: number) => Effect.Effect<void>
}

/** A clock a year and a day ahead of the real one: a compile must not depend on the time. */
const SHIFT_MS = 366 * 24 * 3600 * 1000
const shiftedClock = (): Clock.Clock => {
  const real = Clock.make()
  const millis = () => real.unsafeCurrentTimeMillis() + SHIFT_MS
  const nanos = () => real.unsafeCurrentTimeNanos() + BigInt(SHIFT_MS) * 1_000_000n
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: millis,
    currentTimeMillis: Effect.sync(millis),
    unsafeCurrentTimeNanos: nanos,
    currentTimeNanos: Effect.sync(nanos),
    sleep: (duration) => real.sleep(duration)
  }
}

/** The query of the prefix probe: only the query changes, so the static prefix must not. */
const PROBE_QUERY = "Summarize what changed since my last question, briefly."

/** A compile that failed is evidence (a refusal, or a failure the checks report); the rest is not. */
const COMPILE_ERRORS: { readonly [K in CompileError["_tag"]]: true } = {
  InvalidManifest: true,
  HistoryCorrupt: true,
  UnresolvedReference: true,
  InvalidContextKey: true,
  DuplicateInput: true,
  UnknownModel: true,
  BudgetExceeded: true
}
const isCompileError = (error: { readonly _tag: string }): error is CompileError =>
  Object.hasOwn(COMPILE_ERRORS, error._tag)

/** The process died here (a recorded crash): the turn stays unfinished, as after a real crash. */
class Crash {
  readonly _tag = "Crash"
}

/**
 * Replays one session for one profile through the turn engine, with the recording as the model
 * and the tools; the evidence of every compile and compaction.
 */
export const replaySession = (session: RecordedSession, profile: Profile, options: ReplayOptions = {}) =>
  Effect.gen(function* () {
    const compiler = yield* ContextCompiler
    const compactor = yield* HistoryCompactor
    const registry = yield* ModelRegistry
    const tokenizer = yield* Tokenizer
    const manifest = yield* Either.match(manifestOf(session, profile), {
      onLeft: (e) => Effect.fail(new InvalidSession({ file: session.id, reason: e.message })),
      onRight: Effect.succeed
    })
    const model = yield* registry.resolve(profile.model)
    const counter: Counter = yield* tokenizer.counter(model)
    const sid = session.id
    const files = {
      global: { "system-prompt.md": session.systemPrompt, "profile.md": session.profile ?? "" },
      sessions: { [sid]: session.files ?? {} }
    }
    const keepTurns = session.settings?.keepTurns ?? 10
    // Compaction triggers on the profile's own window (a session may set a smaller one).
    const window = Math.min(session.settings?.contextWindow ?? DEFAULT_WINDOW, model.contextWindow)
    const recordedErrors = new Map<string, { code?: string; message: string }>()
    const rawResults = new Map<string, unknown>()
    for (const t of session.turns)
      for (const s of t.steps) {
        if (s.type !== "tool_result") continue
        rawResults.set(s.callId, s.result)
        if (s.result.error !== undefined)
          recordedErrors.set(s.callId, {
            message: s.result.error.message,
            ...(s.result.error.code === undefined ? {} : { code: s.result.error.code })
          })
      }
    const rules = expectedRules(session.policy, session.files ?? {}, session.manifest)
    // design.md: a map-reduce worker, planner or reducer gets no earlier turns.
    const role = (session.manifest?.process as { role?: string } | undefined)?.role
    const historyExpected = role === undefined || role === "agent"
    const shifted = shiftedClock()

    // The summary a compaction before the current turn writes; what it was handed.
    let nextSummary: string | undefined
    let summarized: ReadonlyArray<Message> = []
    const summarizer = Layer.succeed(Summarizer, {
      summarize: (request) =>
        Effect.sync(() => {
          summarized = request.messages
          return nextSummary ?? deterministicSummary(request)
        })
    })

    const points: Array<PointEvidence> = []
    const compactions: Array<CompactionEvidence> = []
    const failures: Array<FailureEvidence> = []
    const checkpoints = new Map<number, HistoryDocument>([[0, emptyHistory]])
    // One data root in memory for the whole replay, as a gateway has on disk: history and full tool
    // results written through it are what the compiler reads (the running turn's full observations).
    // Values, not layers, so every build of these services shares them.
    const dataRoot = MemoryStore.makeMemory(files)
    const services = Layer.mergeAll(
      Layer.succeed(Store, dataRoot),
      Layer.succeed(HistoryStore.HistoryStore, HistoryStore.fromStore(dataRoot)),
      summarizer,
      Layer.succeed(Workspace.Workspace, Workspace.fromStore(dataRoot)),
      Layer.succeed(ContextCompiler, compiler),
      Layer.succeed(HistoryCompactor, compactor),
      Layer.succeed(ModelRegistry, registry),
      Layer.succeed(Tokenizer, tokenizer),
      // One compile cache for the session (a value, so every build of these services shares it).
      Layer.succeed(CompileCache.CompileCache, CompileCache.make())
    )

    const run = Effect.gen(function* () {
      const engine = yield* TurnEngine.make
      const store = yield* HistoryStore.HistoryStore
      const load = store.load(sid)
      const setDoc = (doc: HistoryDocument) =>
        store.modify(sid, () => Effect.succeed([undefined, doc] as const))
      const update = (f: (doc: HistoryDocument) => Either.Either<HistoryDocument, Error>, what: string) =>
        store.modify(sid, (doc) =>
          Either.match(f(doc), {
            onLeft: (e) => Effect.fail(new InvalidSession({ file: sid, reason: `${what}: ${e.message}` })),
            onRight: (next) => Effect.succeed([undefined, next] as const)
          })
        )

      for (const [index, turn] of session.turns.entries()) {
        const n = index + 1
        const where = (step: number, phase: Where["phase"]): Where => ({
          session: sid,
          model: profile.id,
          turn: n,
          step,
          phase
        })
        if (turn.restore !== undefined) {
          const checkpoint = checkpoints.get(turn.restore.toTurn)
          if (checkpoint === undefined)
            return yield* new InvalidSession({
              file: sid,
              reason: `turns.${index}.restore: no checkpoint after turn ${turn.restore.toTurn}`
            })
          yield* setDoc(checkpoint)
          yield* engine.reset(sid)
        }
        for (const action of turn.actions ?? []) {
          const doc = yield* load
          const target =
            action.type === "pin"
              ? doc.messages.find((m) => m.meta.turn === action.turn && m.meta.kind === "input")
              : doc.messages.find(
                  (m) =>
                    m.role === "tool" &&
                    m.parts.some((p) => p._tag === "tool-result" && p.callId === action.callId)
                )
          const what = `turns.${index}.actions (${action.type})`
          if (target === undefined)
            return yield* new InvalidSession({ file: sid, reason: `${what}: no such message in history` })
          yield* update(
            (d) =>
              action.type === "pin"
                ? pinMessage(d, target.id)
                : action.type === "dismiss"
                  ? dismissMemory(d, target.id, action.summary)
                  : excludeMessage(d, target.id, action.reason ?? ""),
            what
          )
        }

        // The recording is the model and the tools: each model step is the next recorded group of
        // tool calls (with the words before them) or the final answer; each tool returns its
        // recorded result. A recorded crash stops the turn there; the client then retries it.
        const plan = planSteps(turn.steps)
        let next = 0
        let retry = false
        let results = 0
        const crashAt = turn.crash?.afterStep
        const crashes = (k: number) => crashAt !== undefined && !retry && k === crashAt
        const driver: TurnEngine.Driver<Crash | HistoryError> = {
          model: (compiled) =>
            Effect.gen(function* () {
              const answered = new Set<string>()
              for (const m of (yield* load).messages)
                for (const p of m.parts) if (p._tag === "tool-result") answered.add(p.callId)
              while (plan[next]?.kind === "result" && answered.has(plan[next]!.result!.callId)) next++
              if (crashes(next)) return yield* Effect.fail(new Crash())
              const first = plan[next]
              if (first === undefined || first.kind === "final") {
                next++
                return {
                  text: first?.text ?? "",
                  toolCalls: [],
                  // What this profile's provider would report: the request it was handed and the
                  // answer, counted with its tokenizer (the recorded usage was another model's).
                  usage: {
                    inputTokens: counter.countMessages(chatMessagesOf(compiled)),
                    outputTokens:
                      first?.text === undefined || first.text === "" ? 0 : counter.count(first.text)
                  }
                }
              }
              const taken = modelStepAt(plan, next, crashes)
              next = taken.next
              return { text: taken.text, toolCalls: taken.toolCalls }
            }),
          runTool: (call) =>
            Effect.gen(function* () {
              const at = plan.findIndex((p) => p.kind === "result" && p.result!.callId === call.id)
              if (at !== -1 && crashes(at)) {
                next = at
                return yield* Effect.fail(new Crash())
              }
              if (at >= next) next = at + 1
              results++
              return (plan[at]?.result?.result ?? {
                status: "error",
                error: { message: "no recorded result" }
              }) as RawToolResult
            })
        }
        let phase: Where["phase"] = "input"
        // Inputs history holds before this turn: its compiles must see exactly one more.
        const inputsBefore = (yield* load).messages.filter(
          (m) => m.role === "user" && m.meta.kind === "input"
        ).length
        const turnOptions = (): TurnEngine.TurnOptions => ({
          defaultModel: profile.model,
          maxSteps: Math.max(1, plan.length + 1),
          format: profile.format,
          manifest,
          compaction: {
            window,
            keepTurns,
            ...(session.settings?.triggerRatio === undefined
              ? {}
              : { triggerRatio: session.settings.triggerRatio })
          },
          onCompiled: (result, at) =>
            Effect.gen(function* () {
              const w = where(results, phase)
              phase = "step"
              if (options.onCompiled) yield* options.onCompiled(w, result, model.contextWindow)
              // Again, cold (a fresh compile cache) and a year later (another clock): the same bytes.
              const again = yield* Effect.either(
                compiler
                  .compile(at.options)
                  .pipe(
                    Effect.provide(Layer.succeed(CompileCache.CompileCache, CompileCache.make())),
                    Effect.provide(services),
                    Effect.withClock(shifted)
                  )
              )
              // Once per turn: the same compile with another query keeps the static prefix.
              const probe =
                w.step === 0 && w.phase === "input"
                  ? yield* Effect.either(
                      compiler.compile({ ...at.options, query: PROBE_QUERY }).pipe(Effect.provide(services))
                    )
                  : undefined
              points.push(
                observe({
                  ...w,
                  result,
                  again: Either.isRight(again) ? again.right : { request: null },
                  counter,
                  window: Math.min(model.contextWindow, model.maxInput + result.report.outputReserve),
                  systemPrompt: session.systemPrompt,
                  input: turn.user,
                  historyTurn: at.turn,
                  recordedErrors,
                  otherClock: Either.isRight(again) ? again.right : { request: null },
                  ...(probe !== undefined && Either.isRight(probe) ? { otherQuery: probe.right } : {}),
                  ...(at.options.history === undefined ? {} : { doc: at.options.history }),
                  keepTurns,
                  historyExpected,
                  inputsExpected: inputsBefore + 1,
                  ...(rules === undefined ? {} : { rules })
                })
              )
            }),
          onCompaction: (result, before, after) =>
            Effect.sync(() => {
              compactions.push(
                observeCompaction({
                  where: where(0, "input"),
                  status: result.status,
                  keepTurns,
                  stillOver: result.stillOver,
                  ...(session.settings?.contextWindow === undefined
                    ? {}
                    : { compactionWindow: session.settings.contextWindow }),
                  ...(session.settings?.triggerRatio === undefined
                    ? {}
                    : { triggerRatio: session.settings.triggerRatio }),
                  before,
                  after,
                  ...(result.plan === undefined ? {} : { plan: result.plan }),
                  summarized
                })
              )
            })
        })
        nextSummary = turn.summary
        summarized = []
        const request = {
          sessionId: sid,
          input: turn.user,
          ...(turn.inputKey ? { idempotencyKey: turn.inputKey } : {})
        }
        const attempt = (what: Where["phase"]) =>
          engine.turn(request, driver, turnOptions()).pipe(
            Effect.as<"done" | "crashed">("done"),
            Effect.catchAll((error) => {
              if (error instanceof Crash) return Effect.succeed<"crashed">("crashed")
              if (isCompileError(error))
                return Effect.gen(function* () {
                  const refusal = error._tag === "BudgetExceeded"
                  const doc = refusal ? yield* Effect.orElseSucceed(load, () => emptyHistory) : undefined
                  const lastResult = doc?.messages
                    .filter((m) => m.meta.archivedBy === undefined && m.meta.finished !== true)
                    .flatMap((m) => m.parts.flatMap((p) => (p._tag === "tool-result" ? [p.callId] : [])))
                    .at(-1)
                  const minimum =
                    doc === undefined
                      ? undefined
                      : requiredMinimum({
                          model: profile.id,
                          counter,
                          systemPrompt: session.systemPrompt,
                          ...(rules === undefined ? {} : { rules }),
                          input: turn.user,
                          doc,
                          ...(lastResult === undefined
                            ? {}
                            : { newestFull: { callId: lastResult, result: rawResults.get(lastResult) } })
                        })
                  failures.push({
                    ...where(results, what),
                    tag: error._tag,
                    message: error.message,
                    refusal,
                    ...(minimum ?? {})
                  })
                  return "done" as const
                })
              return Effect.fail(error)
            })
          )
        const first = yield* attempt("input")
        if (first === "crashed") {
          // The process died; the client sends the same input again (same key): the turn resumes.
          retry = true
          phase = "retry"
          yield* attempt("retry")
        }
        checkpoints.set(n, yield* load)
        if (options.onTurn) yield* options.onTurn(n, session.turns.length)
      }
    }).pipe(Effect.provide(services))
    yield* run
    const expected = session.expect?.[profile.id]
    return {
      session: sid,
      model: profile.id,
      points,
      compactions,
      failures,
      ...(expected === undefined ? {} : { expected })
    } satisfies ReplayEvidence
  })
