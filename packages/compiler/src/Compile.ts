/**
 * compile: a session's manifest, files and history in, the exact request for a model out, never
 * over budget, with the report of what went in and why.
 *
 * Five named stages, each a function of its own in `src/internal/`:
 *
 * 1. resolve sources (`resolveSources`): the manifest, system prompts, history and the
 *    collectors' context units, read through the sandboxed `Workspace`;
 * 2. merge references (`mergeReferences`): the input with its `@file` reminder and its references
 *    resolved and appended; for a running turn, its input likewise, and its observations full
 *    (`prepareRunningTurn`);
 * 3. select blocks (`selectBlocks`): the budget over whole blocks and turns, with the manifest's
 *    shares: the required layers (system prompt, input or running turn, rules, pinned turns), then
 *    history planned so no earlier turn goes missing unaccounted (the newest summaries, the newest
 *    turns contiguous, each whole or reduced to placeholders, a note naming what is left out), the
 *    final exact count;
 * 4. format (`makeFormatter`): the composer's order for the policy, rendered for the provider;
 * 5. emit (`emit`): the typed request, the layers, the report, the prefix and the next state.
 *
 * A running turn (no new input while the last turn of history is unfinished: a step of an agent
 * turn) is required like an input. When it does not fit with every observation full, its older
 * observations are shown compressed, oldest first, then as placeholders, the newest kept whole;
 * only when even that does not fit (with the system prompt, rules and pinned turns) is the compile
 * a `BudgetExceeded`.
 */

import { availableInput, DEFAULT_SHARES } from "@ctxo/budget/Allocation"
import type { BudgetExceeded, UnknownModel } from "@ctxo/budget/BudgetErrors"
import type { BudgetReport } from "@ctxo/budget/BudgetReport"
import { ledgerRow } from "@ctxo/budget/Fit"
import { ModelRegistry } from "@ctxo/budget/ModelRegistry"
import { Tokenizer } from "@ctxo/budget/Tokenizer"
import type { HistoryCorrupt } from "@ctxo/history/HistoryErrors"
import { turnSpans } from "@ctxo/history/HistoryView"
import type { HistoryDocument } from "@ctxo/history/Message"
import { textOf, toolCallsOf } from "@ctxo/history/Message"
import { annotateSpan, startSpan, withSpan } from "@ctxo/store/Spans"
import { Context, Effect, Either, Option } from "effect"
import * as CompileCache from "./CompileCache.ts"
import type {
  DuplicateInput,
  InvalidContextKey,
  InvalidManifest,
  UnresolvedReference
} from "./CompilerErrors.ts"
import { type Composition, processRules } from "./Composer.ts"
import type { ContextSource, MemoryItem } from "./ContextSource.ts"
import { emit } from "./internal/emit.ts"
import { makeFormatter } from "./internal/format.ts"
import { mergeReferences } from "./internal/mergeReferences.ts"
import { resolveSources } from "./internal/resolveSources.ts"
import type { RunningTurn } from "./internal/runningTurn.ts"
import { prepareRunningTurn } from "./internal/runningTurn.ts"
import type { Selection } from "./internal/selectBlocks.ts"
import { selectBlocks } from "./internal/selectBlocks.ts"
import { makeCounting } from "./internal/units.ts"
import type { Manifest, Reference } from "./Manifest.ts"
import type { MetaContext } from "./MetaContext.ts"
import type { Format, RenderedRequest } from "./Render.ts"
import type { ContextInfo } from "./ThinkingMap.ts"
import type { OfferedTool, Ranker, ToolSpec } from "./ToolSelection.ts"
import { selectTools } from "./ToolSelection.ts"
import { Workspace } from "./Workspace.ts"

export { chatMessagesOf, openAIChatMessage } from "./internal/units.ts"

export const DEFAULT_MODEL = "openai/gpt-4o"

/**
 * What a deployment sets for every compile (the gateway's config): default shares by source,
 * replacing seed 003's where given; a manifest's `budget.shares` still win over them.
 */
export class CompileDefaults extends Context.Tag("@ctxo/compiler/CompileDefaults")<
  CompileDefaults,
  { readonly shares?: Readonly<Record<string, number>> }
>() {}

/** What a compile leaves for the next compile of the same session. */
export interface CompileState {
  readonly historyStartTurn?: number
  readonly messageHashes: ReadonlyArray<string>
}

export interface CompileOptions {
  readonly sessionId: string
  /** The new user input (default: the manifest's `query`; "" or none: answer the running turn). */
  readonly query?: string
  /**
   * References sent with `query` (the manifest's shape), besides those written inline. Without a
   * `query` they go with the manifest's query, after the manifest's own references.
   */
  readonly references?: ReadonlyArray<Reference>
  readonly model?: string
  /** The model when neither `model` nor the manifest names one (default: DEFAULT_MODEL). */
  readonly defaultModel?: string
  readonly format?: Format
  /** Use this manifest instead of the session's `context-config.json`. */
  readonly manifest?: Manifest
  readonly previous?: CompileState
  /**
   * The session's history as the caller holds it (a gateway's history store, the replay harness),
   * instead of reading the manifest's history file.
   */
  readonly history?: HistoryDocument
  /** The collectors to run (default: `defaultSources`). */
  readonly sources?: ReadonlyArray<ContextSource>
  /**
   * The tools the caller can run (the agent's): sent as the manifest's `tools` says (on demand by
   * default), counted against the `tools` share.
   */
  readonly tools?: ReadonlyArray<OfferedTool>
  /** Memories of the session (L2) and beyond (L3, L4) the memory source may draw on. */
  readonly memory?: ReadonlyArray<MemoryItem>
  /** A thinking-map node's context to show (`tree__context`) instead of the manifest's `tree` (a specialist's step). */
  readonly nodeContext?: ContextInfo
  /** A plan-execute-reflect run's meta context (`meta__context`, cut to the agent-output share). */
  readonly meta?: MetaContext
  /** The client's own tools (`/v1/chat/completions`): all sent, required, counted. */
  readonly clientTools?: ReadonlyArray<ToolSpec>
  /** How relevance is judged (tools, skills, knowledge; default: the compile cache's ranker). */
  readonly rank?: Ranker
}

export interface PrefixStats {
  /** Hash of the static layers in front of the history. */
  readonly hash: string
  /** Tokens of those layers. */
  readonly tokens: number
  /** Leading messages (and their tokens) identical to the previous compile's. */
  readonly unchangedMessages: number
  readonly unchangedTokens: number
}

interface CompileResultBase {
  /** Tokens of each composed layer, in order (history: all its messages). */
  readonly layers: ReadonlyArray<{ readonly id: string; readonly tokens: number; readonly messages?: number }>
  readonly model: string
  readonly composition: Composition
  readonly report: BudgetReport
  readonly prefix: PrefixStats
  readonly warnings: ReadonlyArray<string>
  readonly state: CompileState
}

/** A compile's result; `format` tells which request it holds (narrow on it to read `request`). */
export type CompileResult = CompileResultBase & RenderedRequest

export type CompileError =
  | InvalidManifest
  | HistoryCorrupt
  | UnresolvedReference
  | InvalidContextKey
  | DuplicateInput
  | UnknownModel
  | BudgetExceeded

const orElseFail = <A, E>(either: Either.Either<A, E>) =>
  Either.match(either, { onLeft: Effect.fail, onRight: Effect.succeed })

/**
 * Compiles through the `CompileCache` in the context when there is one (provide
 * `CompileCache.layer` where compiles repeat); without one, through a fresh cache of its own:
 * the same output, only cold.
 */
export const compile = (
  options: CompileOptions
): Effect.Effect<CompileResult, CompileError, Workspace | ModelRegistry | Tokenizer> =>
  Effect.gen(() => compiling(options)).pipe(withSpan("Compiler.compile"))

function* compiling(options: CompileOptions) {
  const ws = yield* Workspace
  const registry = yield* ModelRegistry
  const tokenizer = yield* Tokenizer
  const cache = Option.getOrElse(yield* Effect.serviceOption(CompileCache.CompileCache), CompileCache.make)
  const sid = options.sessionId
  const warnings: Array<string> = []
  const warn = (message: string) => {
    warnings.push(message)
  }

  // 1. resolve sources
  const sources = yield* resolveSources(ws, cache, options, warn).pipe(withSpan("Compiler.resolveSources"))
  const { systemPrompt, turns } = sources
  // The deployment's default shares (the gateway's CTXO_BUDGET_SHARES), the manifest's over them.
  const defaults = Option.getOrUndefined(yield* Effect.serviceOption(CompileDefaults))
  const manifest =
    defaults?.shares === undefined
      ? sources.manifest
      : {
          ...sources.manifest,
          budget: {
            ...sources.manifest.budget,
            shares: { ...defaults.shares, ...sources.manifest.budget.shares }
          }
        }

  // 2. merge references: the new input, or the running turn's input and full observations
  const query = options.query ?? manifest.query ?? ""
  const input = yield* mergeReferences({
    workspace: ws,
    cache,
    sessionId: sid,
    text: query,
    references:
      options.query === undefined
        ? [...manifest.references, ...(options.references ?? [])]
        : (options.references ?? []),
    warn
  }).pipe(withSpan("Compiler.mergeReferences"))
  const last = turns.at(-1)
  const runningTurn = input === "" && last !== undefined && !last.finished ? last : undefined
  const historyFile = manifest.chatHistory.source
  const running: RunningTurn | undefined =
    runningTurn === undefined
      ? undefined
      : yield* prepareRunningTurn({
          workspace: ws,
          cache,
          sessionId: sid,
          turn: runningTurn,
          historyFile,
          warn
        })
  const history = runningTurn === undefined ? turns : turns.filter((t) => t !== runningTurn)

  // model and budget
  const model = yield* registry.resolve(
    options.model ?? manifest.model ?? options.defaultModel ?? DEFAULT_MODEL
  )
  if (model.fallback !== undefined) warnings.push(model.fallback)
  const counter = yield* tokenizer.counter(model)
  const format = options.format ?? (model.provider === "anthropic" ? "anthropic" : "openai")
  const counting = makeCounting(counter, cache)
  for (const id of Object.keys(manifest.budget.shares ?? {}))
    if (!Object.hasOwn(DEFAULT_SHARES, id))
      warnings.push(
        `budget.shares: "${id}" is not a source; the sources are ${Object.keys(DEFAULT_SHARES).join(", ")}`
      )
  const formatter = makeFormatter({ manifest, systemPrompt, input, format })
  const rank = options.rank ?? cache.rank
  const runningInput = runningTurn?.messages.find((m) => m.role === "user")
  const askedFor = input !== "" ? input : runningInput === undefined ? "" : textOf(runningInput)
  const { available } = availableInput({
    window: model.contextWindow,
    maxInput: model.maxInput,
    margin: counter.margin,
    ...(manifest.budget.outputReserve === undefined ? {} : { outputReserve: manifest.budget.outputReserve }),
    ...(manifest.budget.outputReserveRatio === undefined
      ? {}
      : { outputReserveRatio: manifest.budget.outputReserveRatio })
  })
  const units = yield* sources
    .collect({
      query: askedFor,
      counter,
      rank,
      budgetOf: (source) =>
        Math.floor((manifest.budget.shares?.[source] ?? DEFAULT_SHARES[source] ?? 0) * available)
    })
    .pipe(withSpan("Compiler.collect"))

  // The tools source: the client's, and the offered ones the input wants.
  const toolChoice = selectTools({
    offered: options.tools ?? [],
    client: options.clientTools ?? [],
    load: manifest.tools.load,
    ...(manifest.tools.alwaysOn === undefined ? {} : { alwaysOn: manifest.tools.alwaysOn }),
    input: askedFor,
    used: new Set((runningTurn?.messages ?? []).flatMap((m) => toolCallsOf(m).map((c) => c.name))),
    rank
  })
  const toolUnits = toolChoice.wanted.map((c) => counting.tool(c.spec, c.required))

  // 3. select blocks: with the running turn's observations full, then, while the required layers
  // do not fit, with its older observations compressed, then as placeholders (oldest first; the
  // newest stays whole): the fewest steps of that fallback that fit.
  const rules = processRules(manifest.process)
  const selectWith = (v: number) =>
    selectBlocks({
      model,
      counter,
      counting,
      formatter,
      manifest,
      systemPrompt,
      input,
      // Every property always there (undefined when not given): one shape of options for every
      // compile, so the optimized code of the selection is not thrown away by the first compile
      // of a session (no previous state) or of a running turn.
      running: running === undefined ? undefined : running.variant(v),
      units,
      tools: toolUnits,
      history: {
        turns: history,
        notOffered: sources.notOffered,
        summaries: sources.view.summaries,
        archivedTurns: sources.archivedTurns,
        file: historyFile,
        shown: rules.showsHistory,
        summariesShown: rules.shares
      },
      previous: options.previous,
      recall: { query: askedFor, rank }
    })
  // Measured as its own stage (pure code: the span starts before it and ends after it).
  const endSelect = yield* startSpan("Compiler.selectBlocks")
  let v = 0
  let selection: Either.Either<Selection, BudgetExceeded> = selectWith(v)
  if (Either.isLeft(selection) && running !== undefined && running.variants > 0) {
    // The fewest fallback steps that fit (more steps, fewer tokens): a binary search.
    let lo = 1
    let hi = running.variants
    let found: Either.Either<Selection, BudgetExceeded> | undefined
    while (lo <= hi) {
      const mid = (lo + hi) >> 1
      const attempt = selectWith(mid)
      if (Either.isRight(attempt)) {
        found = attempt
        v = mid
        hi = mid - 1
      } else lo = mid + 1
    }
    if (found !== undefined) selection = found
  }
  yield* endSelect
  const selected = yield* orElseFail(selection)
  const { historyStartTurn, reducedTurns, leftOutTurns } = selected
  // The offered tools the input does not want, in the ledger with why.
  const fitted =
    toolChoice.notWanted.length === 0
      ? selected.fitted
      : {
          ...selected.fitted,
          report: {
            ...selected.fitted.report,
            units: [
              ...selected.fitted.report.units,
              ...toolChoice.notWanted.map((c) =>
                ledgerRow(counting.tool(c.spec, false), "dropped", counter.method, c.reason)
              )
            ]
          }
        }
  if (v > 0 && running !== undefined) warnings.push(running.describe(v))
  if (leftOutTurns.length > 0)
    warnings.push(
      `history: ${turnSpans(leftOutTurns)} left out with no summary shown for them (they do not fit even reduced); the request's note names them`
    )
  else if (reducedTurns.length > 0)
    warnings.push(
      `history: ${turnSpans(reducedTurns)} shown reduced (tool results as placeholders) to fit the budget`
    )

  // 4. format
  const endFormat = yield* startSpan("Compiler.format")
  const composition = yield* orElseFail(formatter.compose(fitted.included))
  const rendered = formatter.render(composition)
  yield* endFormat

  // 5. emit
  const endEmit = yield* startSpan("Compiler.emit")
  const result = emit({
    cache,
    model: model.id,
    counter,
    counting,
    composition,
    rendered,
    fitted,
    historyStartTurn,
    warnings,
    ...(options.previous === undefined ? {} : { previous: options.previous })
  })
  yield* endEmit
  yield* annotateSpan({
    "ctxo.session": sid,
    "ctxo.model": model.id,
    "ctxo.tokens.used": result.report.total ?? 0,
    "ctxo.tokens.available": available
  })
  return result
}
