/**
 * One budgeted request, start to finish: allocate the model's input budget among sources, fit each
 * source's units into its grant at unit boundaries, count the assembled request once, whole, and
 * repair it until that exact count fits. The result is the units to send and the `BudgetReport`.
 */
import { Either } from "effect"
import type { SourceRequest } from "./Allocation.ts"
import { allocate, DEFAULT_PRIORITIES } from "./Allocation.ts"
import { BudgetExceeded } from "./BudgetErrors.ts"
import type { BudgetReport, SourceLedger, UnitLedger } from "./BudgetReport.ts"
import type { Unit } from "./Fit.ts"
import { fitUnits, ledgerRow, repair, unitLedger } from "./Fit.ts"
import type { ModelInfo } from "./ModelRegistry.ts"
import type { Counter } from "./Tokenizer.ts"

export interface SourceInput<U extends Unit> extends Omit<SourceRequest, "ask"> {
  /** The source's units, most wanted first (history: newest turn first). */
  readonly units: ReadonlyArray<U>
  /** Stop at the first unit that does not fit (whole turns, no gaps). */
  readonly contiguous?: boolean
}

export interface FitBudgetOptions<U extends Unit> {
  readonly model: ModelInfo & { readonly requested?: string; readonly fallback?: string }
  readonly counter: Counter
  readonly sources: ReadonlyArray<SourceInput<U>>
  readonly outputReserve?: number
  readonly outputReserveRatio?: number
  /** Shares by source id, replacing the defaults; a share of 0 switches a source off. */
  readonly shares?: Readonly<Record<string, number>>
  /**
   * Assembles the request from the included units and counts it whole. Units come in the order of
   * `sources` and their units (history newest first): put them in request order before counting.
   */
  readonly countTotal: (included: ReadonlyArray<U>) => number
}

export interface FittedRequest<U extends Unit> {
  readonly included: ReadonlyArray<U>
  readonly report: BudgetReport
}

/** The lists one after another (a loop: `flatMap` over a few long lists is several times slower). */
const concat = <A>(lists: ReadonlyArray<ReadonlyArray<A>>): Array<A> => {
  const out: Array<A> = []
  for (const list of lists) for (const a of list) out.push(a)
  return out
}

/**
 * A unit's row as included, kept with the unit (rows are never changed): a warm compile hands the
 * budget the same units as the last one, most of them included again.
 */
const includedRows = new WeakMap<Unit, UnitLedger>()
const includedRow = (u: Unit, counted: UnitLedger["counted"]): UnitLedger => {
  const known = includedRows.get(u)
  if (known?.counted === counted) return known
  const row = ledgerRow(u, "included", counted)
  includedRows.set(u, row)
  return row
}

export const fitBudget = <U extends Unit>(
  options: FitBudgetOptions<U>
): Either.Either<FittedRequest<U>, BudgetExceeded> => {
  const { model, counter } = options
  const allocation = allocate({
    model: model.id,
    window: model.contextWindow,
    maxInput: model.maxInput,
    margin: counter.margin,
    ...(options.outputReserve === undefined ? {} : { outputReserve: options.outputReserve }),
    ...(options.outputReserveRatio === undefined ? {} : { outputReserveRatio: options.outputReserveRatio }),
    ...(options.shares === undefined ? {} : { shares: options.shares }),
    sources: options.sources.map(({ units, contiguous: _, ...request }) => ({
      ...request,
      ask: units.reduce((sum, u) => sum + u.tokens, 0)
    }))
  })

  const header = (sources: ReadonlyArray<SourceLedger>, units: ReadonlyArray<UnitLedger>) => ({
    model: model.id,
    tokenizer: { name: counter.tokenizer, method: counter.method, margin: counter.margin },
    window: {
      tokens: model.contextWindow,
      source:
        model.fallback === undefined
          ? model.sources.contextWindow
          : `${model.sources.contextWindow}; ${model.fallback}`
    },
    maxInput: model.maxInput,
    sources,
    units
  })

  if (Either.isLeft(allocation)) {
    const error = allocation.left
    const units = options.sources.flatMap((s) =>
      unitLedger(
        s.units,
        s.required ? "included" : "dropped",
        counter.method,
        "required sources alone exceed the budget"
      )
    )
    return Either.left(
      new BudgetExceeded({
        model: error.model,
        available: error.available,
        required: error.required,
        sources: error.sources,
        report: { ...header([], units), outputReserve: 0, available: error.available, repairs: [] }
      })
    )
  }

  const { grants, available } = allocation.right
  const off = new Set(allocation.right.off)
  const order: Array<U> = concat(options.sources.map((s) => s.units))
  const fitted = options.sources.map((s) => ({
    source: s,
    ...fitUnits({ units: s.units, budget: grants[s.id]!, ...(s.contiguous ? { contiguous: true } : {}) })
  }))
  // A unit without its own priority has its source's. A contiguous source (history) offers only its
  // next unit back to the refill, so no gap opens.
  const sourcePriority = new Map(
    options.sources.map((s) => [s.id, s.priority ?? DEFAULT_PRIORITIES[s.id] ?? 0])
  )
  const repaired = repair({
    // In the request's order already: each source keeps its units' order, sources in theirs.
    included: concat(fitted.map((f) => f.included)),
    // A source switched off (share 0) is never refilled into the slack.
    candidates: concat(
      fitted.map((f) => (off.has(f.source.id) ? [] : f.source.contiguous ? f.dropped.slice(0, 1) : f.dropped))
    ),
    limit: available,
    countTotal: options.countTotal,
    priorityOf: (u) => u.priority ?? sourcePriority.get(u.source) ?? 0,
    order
  })

  // The included units are a subsequence of the request's order: walked beside it, no set of them.
  const kept = repaired.included
  let next = 0
  const droppedByRepair = new Set(repaired.repairs.filter((r) => r.action === "dropped").map((r) => r.unit))
  const units: Array<UnitLedger> = order.map((u) => {
    const source = u.source
    if (kept[next] === u) {
      next++
      return includedRow(u, counter.method)
    }
    const reason = droppedByRepair.has(u.id)
      ? "dropped when the assembled request was counted whole"
      : off.has(source)
        ? `${source} has a share of 0 in the configured shares, so it gets no tokens`
        : `over the ${grants[source] ?? 0}-token grant of ${source}`
    return ledgerRow(u, "dropped", counter.method, reason)
  })
  // A unit restored into the slack left by others may take a source past its grant: the ledger
  // shows that as surplus received, so `used <= grant` holds for every source.
  const usedBySource = new Map<string, number>()
  for (const u of repaired.included) usedBySource.set(u.source, (usedBySource.get(u.source) ?? 0) + u.tokens)
  const sources = allocation.right.ledger.map((ledger) => {
    const used = usedBySource.get(ledger.id) ?? 0
    const extra = Math.max(0, used - ledger.grant)
    return { ...ledger, used, grant: ledger.grant + extra, surplusReceived: ledger.surplusReceived + extra }
  })
  const report: BudgetReport = {
    ...header(sources, units),
    outputReserve: allocation.right.outputReserve,
    available,
    total: repaired.total,
    repairs: repaired.repairs
  }
  if (!repaired.fits) {
    const required = repaired.included.filter((u) => u.required)
    return Either.left(
      new BudgetExceeded({
        model: model.id,
        available,
        required: repaired.total,
        sources: options.sources
          .filter((s) => s.required)
          .map((s) => ({
            id: s.id,
            tokens: required.filter((u) => u.source === s.id).reduce((n, u) => n + u.tokens, 0)
          })),
        report
      })
    )
  }
  return Either.right({ included: repaired.included, report })
}
