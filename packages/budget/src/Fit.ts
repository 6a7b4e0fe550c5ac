/**
 * Fitting content into grants at unit boundaries (whole blocks, whole turns, whole lines), marking
 * every cut, and the final repair: per-unit counts do not add up to the count of the assembled
 * request (BPE merges across joins), so "never over" is checked once on the final request and
 * repaired by dropping the lowest-priority unit, then refilling the slack.
 */
import { createHash } from "node:crypto"
import type { UnitLedger } from "./BudgetReport.ts"

/** Stable short hash of a unit's text for the ledger (SHA-256, first 16 hex digits). */
export const contentHash = (text: string): string =>
  createHash("sha256").update(text).digest("hex").slice(0, 16)

export interface Unit {
  readonly id: string
  readonly source: string
  readonly text: string
  /** Tokens of `text` on its own. */
  readonly tokens: number
  /** Higher is kept longer by the repair step (default 0). */
  readonly priority?: number
  readonly ref?: string
  /** `contentHash(text)` when the caller already has it (a warm compile keeps it per unit). */
  readonly hash?: string
  /** Never dropped (system prompt, current user input). */
  readonly required?: boolean
}

export interface FitResult<U extends Unit> {
  readonly included: ReadonlyArray<U>
  readonly dropped: ReadonlyArray<U>
  readonly used: number
}

/**
 * Keeps units in the order given (most wanted first) while they fit `budget`. With `contiguous`
 * (history: newest turn first) it stops at the first unit that does not fit, so no gap opens;
 * otherwise (knowledge blocks) a smaller later unit may still fit.
 */
export const fitUnits = <U extends Unit>(options: {
  readonly units: ReadonlyArray<U>
  readonly budget: number
  readonly contiguous?: boolean
}): FitResult<U> => {
  const included: Array<U> = []
  const dropped: Array<U> = []
  let used = 0
  let stopped = false
  for (const unit of options.units) {
    if (!stopped && used + unit.tokens <= options.budget) {
      included.push(unit)
      used += unit.tokens
    } else {
      dropped.push(unit)
      if (options.contiguous) stopped = true
    }
  }
  return { included, dropped, used }
}

export interface FitLinesResult {
  readonly text: string
  readonly tokens: number
  readonly keptLines: number
  readonly totalLines: number
  /** The marker line that replaced the cut lines, when anything was cut. */
  readonly marker?: string
}

/**
 * Cuts a text at line boundaries to fit `budget`, keeping its head (or its tail), and puts a marker
 * line where lines were cut: `[… 120 of 400 lines cut to fit the token budget]`. The marker counts
 * against the budget. Nothing fits: the result is the marker alone if it fits, else empty.
 */
export const fitLines = (options: {
  readonly text: string
  readonly budget: number
  readonly count: (text: string) => number
  readonly keep?: "head" | "tail"
}): FitLinesResult => {
  const { text, budget, count } = options
  const whole = count(text)
  const lines = text.split("\n")
  if (whole <= budget) return { text, tokens: whole, keptLines: lines.length, totalLines: lines.length }
  const keepTail = options.keep === "tail"
  const markerFor = (kept: number) =>
    `[… ${lines.length - kept} of ${lines.length} lines cut to fit the token budget]`
  const assemble = (kept: number) => {
    const marker = markerFor(kept)
    if (kept === 0) return marker
    return keepTail
      ? `${marker}\n${lines.slice(lines.length - kept).join("\n")}`
      : `${lines.slice(0, kept).join("\n")}\n${marker}`
  }
  // Binary search on the number of kept lines, each candidate counted whole (joins merge tokens).
  let lo = 0
  let hi = lines.length - 1
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1
    if (count(assemble(mid)) <= budget) lo = mid
    else hi = mid - 1
  }
  const result = assemble(lo)
  const tokens = count(result)
  if (tokens > budget)
    return { text: "", tokens: 0, keptLines: 0, totalLines: lines.length, marker: markerFor(0) }
  return { text: result, tokens, keptLines: lo, totalLines: lines.length, marker: markerFor(lo) }
}

export interface RepairResult<U extends Unit> {
  readonly included: ReadonlyArray<U>
  readonly dropped: ReadonlyArray<U>
  /** Exact tokens of the final assembled request. */
  readonly total: number
  /** False when only required units are left and they still exceed the limit. */
  readonly fits: boolean
  readonly repairs: ReadonlyArray<{
    readonly action: "dropped" | "restored"
    readonly unit: string
    readonly totalBefore: number
    readonly totalAfter: number
  }>
}

/**
 * Makes the exact count of the final request fit `limit`. `countTotal` assembles the request from
 * the included units (in their original order) and counts it whole. While over: drop the
 * lowest-priority droppable unit (ties: the last one). Then refill: candidates in priority order
 * (the ones just dropped and any `candidates` whose own tokens fit the slack) are added back when
 * the whole still fits (at most `maxRefills` attempts: each one counts the whole request).
 */
export const repair = <U extends Unit>(options: {
  readonly included: ReadonlyArray<U>
  readonly candidates?: ReadonlyArray<U>
  readonly limit: number
  readonly countTotal: (included: ReadonlyArray<U>) => number
  /** A unit's priority (default: its own `priority`, else 0). */
  readonly priorityOf?: (unit: U) => number
  /** At most this many refill attempts, each a whole count (default 16). */
  readonly maxRefills?: number
}): RepairResult<U> => {
  const priority = options.priorityOf ?? ((unit: U) => unit.priority ?? 0)
  const order = new Map<U, number>([...options.included, ...(options.candidates ?? [])].map((u, i) => [u, i]))
  const sorted = (list: Iterable<U>) => [...list].sort((a, b) => order.get(a)! - order.get(b)!)
  const included = new Set(options.included)
  const repairs: Array<RepairResult<U>["repairs"][number]> = []
  const droppedHere: Array<U> = []
  let total = options.countTotal(sorted(included))

  while (total > options.limit) {
    let victim: U | undefined
    for (const unit of included) {
      if (unit.required) continue
      if (victim === undefined || priority(unit) <= priority(victim)) victim = unit
    }
    if (victim === undefined) break
    included.delete(victim)
    droppedHere.push(victim)
    const after = options.countTotal(sorted(included))
    repairs.push({ action: "dropped", unit: victim.id, totalBefore: total, totalAfter: after })
    total = after
  }
  const fits = total <= options.limit

  if (fits) {
    const refill = [...droppedHere, ...(options.candidates ?? [])]
      .filter((u, i, all) => all.indexOf(u) === i)
      .sort((a, b) => priority(b) - priority(a) || order.get(a)! - order.get(b)!)
    let attempts = options.maxRefills ?? 16
    for (const unit of refill) {
      if (unit.tokens > options.limit - total) continue
      if (attempts-- <= 0) break
      included.add(unit)
      const after = options.countTotal(sorted(included))
      if (after <= options.limit) {
        repairs.push({ action: "restored", unit: unit.id, totalBefore: total, totalAfter: after })
        total = after
      } else {
        included.delete(unit)
      }
    }
  }
  const final = sorted(included)
  const dropped = sorted([...droppedHere, ...(options.candidates ?? [])].filter((u) => !included.has(u)))
  return { included: final, dropped: [...new Set(dropped)], total, fits, repairs }
}

/** Ledger rows for units, with how they were counted and why any was left out. */
export const unitLedger = (
  units: ReadonlyArray<Unit>,
  status: UnitLedger["status"],
  counted: UnitLedger["counted"],
  reason?: string
): Array<UnitLedger> => units.map((u) => ledgerRow(u, status, counted, reason))

/** One unit's ledger row (built field by field: a compile writes hundreds). */
export const ledgerRow = (
  u: Unit,
  status: UnitLedger["status"],
  counted: UnitLedger["counted"],
  reason?: string
): UnitLedger => {
  const row: { -readonly [K in keyof UnitLedger]: UnitLedger[K] } = {
    id: u.id,
    source: u.source
  } as UnitLedger
  if (u.ref !== undefined) row.ref = u.ref
  row.hash = u.hash ?? contentHash(u.text)
  row.tokens = u.tokens
  row.counted = counted
  row.status = status
  if (reason !== undefined) row.reason = reason
  return row
}
