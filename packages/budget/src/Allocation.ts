/**
 * Splits what a model can take among the context sources (seed 003, "Token 预算分配"):
 *
 *   available = min(window - output reserve, max input) × (1 - margin)
 *
 * 1. Required sources (system prompt, current user input) get all they ask, never less. If they
 *    alone exceed `available`, that is a `BudgetExceeded` carrying the numbers: nothing is cut.
 * 2. Every other source is guaranteed its share of `available` (default shares below), in
 *    priority order, as far as what is left after the required sources allows.
 * 3. What a source does not use of its share flows to the others by priority: the highest
 *    priority source with unmet demand takes first.
 * 4. Configured `shares` replace the default shares by source id. A source configured with a share
 *    of 0 is switched off: it gets nothing, not even surplus (`off` lists it for the report).
 *
 * The sum of grants never exceeds `available`; more window never gives a source less; the same
 * input gives the same output.
 */
import { Either } from "effect"
import { BudgetExceeded } from "./BudgetErrors.ts"
import type { SourceLedger } from "./BudgetReport.ts"

/** Seed 003's default shares of the available budget. */
export const DEFAULT_SHARES: Readonly<Record<string, number>> = {
  system_prompt: 0.12,
  user_input: 0.12,
  tools: 0.15,
  skills: 0.1,
  recent_history: 0.18,
  important_history: 0.12,
  semantic: 0.06,
  knowledge: 0.1,
  agent_output: 0.05
}

/** Who takes surplus first (higher first). The user's words and the rules outrank recall. */
export const DEFAULT_PRIORITIES: Readonly<Record<string, number>> = {
  user_input: 100,
  system_prompt: 90,
  tools: 80,
  recent_history: 70,
  skills: 60,
  important_history: 50,
  knowledge: 40,
  semantic: 30,
  agent_output: 20
}

export const DEFAULT_OUTPUT_RESERVE_RATIO = 0.1

export interface SourceRequest {
  readonly id: string
  /** Tokens the source would use if it got everything (its whole content). */
  readonly ask: number
  /** Fraction of the available budget (default `DEFAULT_SHARES[id]`, else 0). */
  readonly share?: number
  /** Higher takes surplus first (default `DEFAULT_PRIORITIES[id]`, else 0). */
  readonly priority?: number
  /** Never cut (system prompt, current user input). */
  readonly required?: boolean
}

export interface AllocateOptions {
  /** For messages and the report. */
  readonly model?: string
  readonly window: number
  /** Input cap when it is below the window (gpt-5: 272k of 400k). */
  readonly maxInput?: number
  /** Tokens kept for the answer; default `outputReserveRatio × window`. */
  readonly outputReserve?: number
  readonly outputReserveRatio?: number
  /** Fraction kept free because counts are estimates (a tokenizer's `margin`). */
  readonly margin?: number
  /** Shares by source id, replacing `DEFAULT_SHARES` (a source's own `share` still wins). */
  readonly shares?: Readonly<Record<string, number>>
  readonly sources: ReadonlyArray<SourceRequest>
}

export interface Allocation {
  readonly window: number
  readonly maxInput: number
  readonly outputReserve: number
  readonly available: number
  readonly grants: Readonly<Record<string, number>>
  /** Sources switched off by a configured share of 0: they get no tokens at all. */
  readonly off: ReadonlyArray<string>
  /** Per source, in the order given; `used` is 0 until the caller fits units into the grants. */
  readonly ledger: ReadonlyArray<SourceLedger>
}

const nonNegative = (n: number) => (Number.isFinite(n) && n > 0 ? Math.floor(n) : 0)

/** Input budget of a model: min(window - reserve, max input) less the margin, in whole tokens. */
export const availableInput = (options: Omit<AllocateOptions, "sources">) => {
  const window = nonNegative(options.window)
  const reserve = nonNegative(
    options.outputReserve ?? Math.ceil(window * (options.outputReserveRatio ?? DEFAULT_OUTPUT_RESERVE_RATIO))
  )
  const maxInput = nonNegative(options.maxInput ?? window)
  const margin = Math.min(Math.max(options.margin ?? 0, 0), 1)
  const available = nonNegative(Math.min(window - reserve, maxInput) * (1 - margin))
  return { window, reserve, maxInput, available }
}

export const allocate = (options: AllocateOptions): Either.Either<Allocation, BudgetExceeded> => {
  const { window, reserve, maxInput, available } = availableInput(options)
  const seen = new Set<string>()
  const sources = options.sources.map((s, index) => {
    if (seen.has(s.id)) throw new Error(`allocate: source "${s.id}" appears twice`)
    seen.add(s.id)
    return {
      id: s.id,
      index,
      ask: nonNegative(s.ask),
      share: Math.max(0, s.share ?? options.shares?.[s.id] ?? DEFAULT_SHARES[s.id] ?? 0),
      priority: s.priority ?? DEFAULT_PRIORITIES[s.id] ?? 0,
      required: s.required ?? false,
      off: !(s.required ?? false) && s.share === undefined && options.shares?.[s.id] === 0
    }
  })
  // Shares that add up to more than the whole are scaled down so the guarantees can all hold.
  const shareSum = sources.reduce((sum, s) => sum + s.share, 0)
  const scale = shareSum > 1 ? 1 / shareSum : 1
  const cap = (s: (typeof sources)[number]) => Math.floor(s.share * scale * available)

  const required = sources.filter((s) => s.required)
  const requiredTotal = required.reduce((sum, s) => sum + s.ask, 0)
  if (requiredTotal > available) {
    return Either.left(
      new BudgetExceeded({
        model: options.model ?? "model",
        available,
        required: requiredTotal,
        sources: required.map((s) => ({ id: s.id, tokens: s.ask }))
      })
    )
  }

  const byPriority = sources
    .filter((s) => !s.required)
    .sort((a, b) => b.priority - a.priority || a.index - b.index)
  const grants = new Map<string, number>(required.map((s) => [s.id, s.ask]))
  let pool = available - requiredTotal
  for (const s of byPriority) {
    const grant = Math.min(s.ask, cap(s), pool)
    grants.set(s.id, grant)
    pool -= grant
  }
  for (const s of byPriority) {
    if (s.off) continue
    const extra = Math.min(s.ask - grants.get(s.id)!, pool)
    if (extra > 0) {
      grants.set(s.id, grants.get(s.id)! + extra)
      pool -= extra
    }
  }

  const ledger: Array<SourceLedger> = sources.map((s) => {
    const grant = grants.get(s.id)!
    const guaranteed = cap(s)
    return {
      id: s.id,
      required: s.required,
      priority: s.priority,
      share: s.share * scale,
      cap: guaranteed,
      ask: s.ask,
      grant,
      used: 0,
      surplusGiven: Math.max(0, guaranteed - s.ask),
      surplusReceived: Math.max(0, grant - guaranteed)
    }
  })
  return Either.right({
    window,
    maxInput,
    outputReserve: reserve,
    available,
    grants: Object.fromEntries(grants),
    off: sources.filter((s) => s.off).map((s) => s.id),
    ledger
  })
}
