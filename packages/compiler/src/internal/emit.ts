/**
 * Stage "emit": the result of a compile. The rendered request with its format, the tokens of each
 * layer, the prefix a provider can cache (the static layers in front of the history, their hash
 * and tokens, and how many leading messages are unchanged since the previous compile), the budget
 * report, warnings, and the state the next compile starts from.
 */
import type { FittedRequest } from "@ctxo/budget/Budget"
import { withCuts } from "@ctxo/budget/BudgetReport"
import { contentHash } from "@ctxo/budget/Fit"
import type { Counter } from "@ctxo/budget/Tokenizer"
import type { CompileResult, CompileState, PrefixStats } from "../Compile.ts"
import type * as CompileCache from "../CompileCache.ts"
import type { Composition } from "../Composer.ts"
import type { RenderedRequest } from "../Render.ts"
import type { CompileUnit, Counting } from "./units.ts"

/** The request's messages as rendered (anthropic: the top-level system first; react: the prompt). */
const renderedMessages = (rendered: RenderedRequest): ReadonlyArray<object> => {
  switch (rendered.format) {
    case "openai":
      return rendered.request.messages
    case "anthropic":
      return [{ system: rendered.request.system }, ...rendered.request.messages]
    case "react":
      return [rendered.request]
  }
}

export const emit = (options: {
  /** Hashes of rendered messages (the prefix comparison), by the rendered object. */
  readonly cache: CompileCache.Service
  readonly model: string
  readonly counter: Counter
  readonly counting: Counting
  readonly composition: Composition
  readonly rendered: RenderedRequest
  readonly fitted: FittedRequest<CompileUnit>
  readonly historyStartTurn: number | undefined
  readonly previous?: CompileState
  readonly warnings: ReadonlyArray<string>
}): CompileResult => {
  const { counter, counting, composition, rendered, fitted } = options
  const messageHashes = renderedMessages(rendered).map((m) => options.cache.renderedHash(m))
  const staticLayers = composition.layers.filter((_, i) =>
    composition.layers.slice(0, i + 1).every((l) => l._tag === "system")
  )
  let unchangedMessages = 0
  const previousHashes = options.previous?.messageHashes ?? []
  while (
    unchangedMessages < messageHashes.length &&
    previousHashes[unchangedMessages] === messageHashes[unchangedMessages]
  )
    unchangedMessages++
  const prefix: PrefixStats = {
    hash: contentHash(
      staticLayers.map((l) => (l._tag === "system" ? `${l.id}\n${l.text}` : "")).join("\n\n")
    ),
    tokens: staticLayers.reduce((n, l) => n + (l._tag === "system" ? counter.count(l.text) : 0), 0),
    unchangedMessages,
    unchangedTokens: counting.countRequest(rendered, unchangedMessages) - counting.requestBase
  }
  const layers = composition.layers.map((l) =>
    l._tag === "history"
      ? {
          id: l.id,
          // The included turns' tokens as the budget counted them (framing included).
          tokens: fitted.included.reduce((n, u) => n + (u.kind === "turn" ? u.tokens : 0), 0),
          messages: l.messages.length
        }
      : { id: l.id, tokens: counter.count(l.text) }
  )
  const state: CompileState = {
    ...(options.historyStartTurn === undefined ? {} : { historyStartTurn: options.historyStartTurn }),
    messageHashes
  }
  return {
    layers,
    model: options.model,
    ...rendered,
    composition,
    report: withCuts(fitted.report),
    prefix,
    warnings: options.warnings,
    state
  }
}
