/**
 * Replays a recorded session turn by turn for one model profile, through the same pieces the
 * gateway uses: the history recorder (inputs, steps, compressed tool results), compaction before
 * each turn, and the compiler at the turn's input and after every tool result. Every compiled
 * request is measured for the invariants (`Invariants.observe`); nothing here judges.
 *
 * The compiler and the compactor are services (`ContextCompiler`, `HistoryCompactor`), so a test
 * can swap in a broken one and see the checks catch it.
 */

import { ModelRegistry } from "@ctxo/budget/ModelRegistry"
import type { Counter } from "@ctxo/budget/Tokenizer"
import { Tokenizer } from "@ctxo/budget/Tokenizer"
import type { CompileError, CompileOptions, CompileResult, CompileState } from "@ctxo/compiler/Compile"
import { compile } from "@ctxo/compiler/Compile"
import { parseManifest } from "@ctxo/compiler/Manifest"
import type { Format } from "@ctxo/compiler/Render"
import * as Workspace from "@ctxo/compiler/Workspace"
import type { CompactionResult, CompactOptions } from "@ctxo/history/Compaction"
import { compact } from "@ctxo/history/Compaction"
import type { HistoryError } from "@ctxo/history/HistoryErrors"
import { HistoryStore, layerMemory } from "@ctxo/history/HistoryStore"
import { dismissMemory, excludeMessage, pinMessage } from "@ctxo/history/HistoryView"
import type { HistoryDocument, Message } from "@ctxo/history/Message"
import { emptyHistory } from "@ctxo/history/Message"
import { endTurn, recordStep, recordToolResult, startTurn } from "@ctxo/history/Recorder"
import { deterministicSummary, Summarizer } from "@ctxo/history/Summarizer"
import type { RawToolResult } from "@ctxo/history/ToolResultCompressor"
import { Context, Effect, Either, Layer } from "effect"
import type {
  CompactionEvidence,
  FailureEvidence,
  PointEvidence,
  ReplayEvidence,
  Where
} from "./Invariants.ts"
import { observe, observeCompaction } from "./Invariants.ts"
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

export interface CompilerService {
  readonly compile: (
    options: CompileOptions
  ) => Effect.Effect<CompileResult, CompileError, Workspace.Workspace | ModelRegistry | Tokenizer>
}
export class ContextCompiler extends Context.Tag("@ctxo/replay/ContextCompiler")<
  ContextCompiler,
  CompilerService
>() {}
export const compilerLive: Layer.Layer<ContextCompiler> = Layer.succeed(ContextCompiler, { compile })

export interface CompactorService {
  readonly compact: (
    options: CompactOptions
  ) => Effect.Effect<CompactionResult, HistoryError, HistoryStore | Summarizer>
}
export class HistoryCompactor extends Context.Tag("@ctxo/replay/HistoryCompactor")<
  HistoryCompactor,
  CompactorService
>() {}
export const compactorLive: Layer.Layer<HistoryCompactor> = Layer.succeed(HistoryCompactor, { compact })

/** The live compiler and compactor (the budget services come from the caller). */
export const live: Layer.Layer<ContextCompiler | HistoryCompactor> = Layer.merge(compilerLive, compactorLive)

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
interface Planned {
  readonly kind: "step" | "result" | "final"
  readonly text?: string
  readonly call?: { readonly callId: string; readonly name: string; readonly input: unknown }
  readonly result?: Extract<Step, { type: "tool_result" }>
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

/** Replays one session for one profile; the evidence of every compile and compaction. */
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
    const workspace = Workspace.layerMemory({
      global: { "system-prompt.md": session.systemPrompt, "profile.md": session.profile ?? "" },
      sessions: { [sid]: session.files ?? {} }
    })
    const keepTurns = session.settings?.keepTurns ?? 10
    const window = session.settings?.contextWindow ?? DEFAULT_WINDOW
    const recordedErrors = new Map<string, string>()
    for (const t of session.turns)
      for (const s of t.steps)
        if (s.type === "tool_result" && s.result.error !== undefined)
          recordedErrors.set(s.callId, s.result.error.message)

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
    let state: CompileState | undefined

    const run = Effect.gen(function* () {
      const store = yield* HistoryStore
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

      const compileAt = (where: Where, input: string, historyTurn?: number) =>
        Effect.gen(function* () {
          const history = yield* load
          const compileOptions: CompileOptions = {
            sessionId: sid,
            manifest,
            model: profile.model,
            format: profile.format,
            history,
            // A step's compile has no new input: the turn's input is in history already.
            ...(where.phase === "input" ? { query: input } : { query: "" }),
            ...(state === undefined ? {} : { previous: state })
          }
          const first = yield* Effect.either(compiler.compile(compileOptions))
          if (Either.isLeft(first)) {
            const error = first.left
            failures.push({
              ...where,
              tag: error._tag,
              message: error.message,
              refusal: error._tag === "BudgetExceeded"
            })
            return
          }
          const again = yield* Effect.either(compiler.compile(compileOptions))
          const result = first.right
          state = result.state
          if (options.onCompiled) yield* options.onCompiled(where, result, model.contextWindow)
          points.push(
            observe({
              ...where,
              result,
              again: Either.isRight(again) ? again.right : { ...result, request: null },
              counter,
              window: Math.min(model.contextWindow, model.maxInput + result.report.outputReserve),
              systemPrompt: session.systemPrompt,
              input,
              ...(historyTurn === undefined ? {} : { historyTurn }),
              recordedErrors
            })
          )
        }).pipe(Effect.provide(workspace))

      let lastUsage = 0
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
          state = undefined
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

        // Compaction before the turn (seed 002 C7): the last usage plus the new input.
        nextSummary = turn.summary
        summarized = []
        const before = yield* load
        const compaction = yield* compactor.compact({
          sessionId: sid,
          input: turn.user,
          lastUsage,
          model: { id: model.id, contextWindow: window },
          settings: {
            keepTurns,
            ...(session.settings?.triggerRatio === undefined
              ? {}
              : { triggerRatio: session.settings.triggerRatio })
          },
          count: counter.count
        })
        if (compaction.status !== "not-needed") {
          compactions.push(
            observeCompaction({
              where: where(0, "input"),
              status: compaction.status,
              keepTurns,
              before,
              after: yield* load,
              ...(compaction.plan === undefined ? {} : { plan: compaction.plan }),
              summarized
            })
          )
        }

        yield* compileAt(where(0, "input"), turn.user)
        const plan = planSteps(turn.steps)
        const began = yield* startTurn(sid, {
          input: turn.user,
          ...(turn.inputKey ? { inputKey: turn.inputKey } : {})
        })
        let results = 0
        const answered = new Set<string>()
        for (const [k, step] of plan.entries()) {
          if (turn.crash !== undefined && k === turn.crash.afterStep) {
            // The process dies here; the client sends the same input again (same key).
            const retried = yield* startTurn(sid, {
              input: turn.user,
              ...(turn.inputKey ? { inputKey: turn.inputKey } : {})
            })
            for (const m of (yield* load).messages)
              for (const p of m.parts)
                if (p._tag === "tool-result" && m.meta.turn === retried.turn) answered.add(p.callId)
            yield* compileAt(where(results, "retry"), turn.user, retried.turn)
          }
          if (step.kind === "step") {
            yield* recordStep(sid, began.turn, {
              ...(step.text === undefined ? {} : { text: step.text }),
              ...(step.call === undefined ? {} : { toolCall: step.call })
            })
          } else if (step.kind === "result") {
            const r = step.result!
            // A call the crash interrupted was already answered as interrupted.
            if (answered.has(r.callId)) continue
            yield* recordToolResult(
              sid,
              began.turn,
              { callId: r.callId, name: r.name },
              r.result as RawToolResult
            )
            results++
            yield* compileAt(where(results, "step"), turn.user, began.turn)
          } else {
            yield* endTurn(sid, began.turn, step.text ?? "")
          }
        }
        checkpoints.set(n, yield* load)
        lastUsage = turn.usage === undefined ? lastUsage : turn.usage.inputTokens + turn.usage.outputTokens
        if (options.onTurn) yield* options.onTurn(n, session.turns.length)
      }
    }).pipe(Effect.provide(Layer.merge(layerMemory, summarizer)))
    yield* run
    return { session: sid, model: profile.id, points, compactions, failures } satisfies ReplayEvidence
  })
