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
 * `included` holds distinct units; a request that fits with nothing to refill comes back as given.
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
  /**
   * The request's units in its order, when it is not the included ones then the candidates (a
   * refilled unit goes back to its place): the order `countTotal` is given and the result keeps.
   */
  readonly order?: ReadonlyArray<U>
}): RepairResult<U> => {
  const priority = options.priorityOf ?? ((unit: U) => unit.priority ?? 0)
  const candidates = options.candidates ?? []
  // Positions, made when first asked: a request that fits as it is, with nothing to refill (most
  // compiles of a session), is counted once and needs none.
  let positions: Map<U, number> | undefined
  const order = () =>
    (positions ??= new Map((options.order ?? [...options.included, ...candidates]).map((u, i) => [u, i])))
  const sorted = (list: Iterable<U>) => {
    const at = order()
    return [...list].sort((a, b) => at.get(a)! - at.get(b)!)
  }
  const distinct = (list: ReadonlyArray<U>) => (list.length < 2 ? list : [...new Set(list)])
  let total = options.countTotal(options.included)
  // A request that fits as packed, with no candidate small enough for the slack (most compiles of a
  // session): counted once, its units handed back as given.
  if (total <= options.limit && candidates.every((u) => u.tokens > options.limit - total)) {
    const left = distinct(candidates)
    return {
      included: options.included,
      dropped: left.length < 2 ? left : sorted(left),
      total,
      fits: true,
      repairs: []
    }
  }
  const included = new Set(options.included)
  /** Whether `included` still iterates in order: a drop keeps the order of the rest, a refill does not. */
  let inOrder = true
  const current = () => (inOrder ? [...included] : sorted(included))
  const repairs: Array<RepairResult<U>["repairs"][number]> = []
  const droppedHere: Array<U> = []

  while (total > options.limit) {
    let victim: U | undefined
    for (const unit of included) {
      if (unit.required) continue
      if (victim === undefined || priority(unit) <= priority(victim)) victim = unit
    }
    if (victim === undefined) break
    included.delete(victim)
    droppedHere.push(victim)
    const after = options.countTotal(current())
    repairs.push({ action: "dropped", unit: victim.id, totalBefore: total, totalAfter: after })
    total = after
  }
  const fits = total <= options.limit

  if (fits && (droppedHere.length > 0 || candidates.length > 0)) {
    const at = order()
    const refill = [...droppedHere, ...candidates]
      .filter((u, i, all) => all.indexOf(u) === i)
      .sort((a, b) => priority(b) - priority(a) || at.get(a)! - at.get(b)!)
    let attempts = options.maxRefills ?? 16
    for (const unit of refill) {
      if (unit.tokens > options.limit - total) continue
      if (attempts-- <= 0) break
      included.add(unit)
      inOrder = false
      const after = options.countTotal(sorted(included))
      if (after <= options.limit) {
        repairs.push({ action: "restored", unit: unit.id, totalBefore: total, totalAfter: after })
        total = after
      } else {
        included.delete(unit)
      }
    }
  }
  const final = current()
  const left = distinct([...droppedHere, ...candidates].filter((u) => !included.has(u)))
  return { included: final, dropped: left.length < 2 ? left : sorted(left), total, fits, repairs }
}

/** What `fitByPriority` needs of a unit; a `Unit` is one. */
export interface Prioritized {
  readonly text: string
  /** Higher is kept first (default 0). */
  readonly priority?: number
  /** Kept whatever the budget (system prompt, current user input). */
  readonly required?: boolean
  /** Tokens of `text` on its own, when the caller has them; else `count` is asked when needed. */
  readonly tokens?: number
}

export interface PriorityFit<U extends Prioritized> {
  /** The units kept, in their original order. */
  readonly included: ReadonlyArray<U>
  /** The units left out, in their original order. */
  readonly dropped: ReadonlyArray<U>
  /** The included units' texts joined by the separator: what was counted. */
  readonly text: string
  /** Exact tokens of `text`. */
  readonly total: number
  /** False when the required units alone exceed the budget (then only they are kept). */
  readonly fits: boolean
  /**
   * True when every dropped unit that ranks above an included one lacks room by its own count (its
   * tokens plus a separator's exceed `budget - total`); false when `maxRounds` ran out first, or
   * nothing fits.
   */
  readonly settled: boolean
  /** Whole-text counts made: the first one, then one per repair or refill round. */
  readonly wholeCounts: number
  /** Units counted on their own (those without `tokens` that the fit had to look at). */
  readonly unitCounts: number
}

/**
 * Keeps the highest-priority units that fit `budget`, in their original order, with the exact count
 * of the text they make joined by `separator` (default a newline) at most `budget`.
 *
 * Units rank by: required first, then higher `priority`, then earlier position. Each unit costs its
 * own tokens plus one separator's; going down the ranking, a unit is kept when that cost fits what
 * is left (a smaller lower-ranked unit may take room a larger one could not: a unit that outranks a
 * kept one was dropped only because it did not fit on top of the kept units that outrank it). The
 * walk stops once not even a one-token unit fits, so units further down are never counted: with
 * thousands of units and a budget that holds a few hundred, most are not. The joined text is then
 * counted whole: BPE merges across joins make it differ from the sum of its parts, so
 * - over the budget (rare: a join that costs more than its parts), the lowest-ranked kept units are
 *   dropped until their cost covers the excess, and the text is counted again; units ranked below
 *   the highest one dropped this way are never taken back, so no gap opens in the ranking;
 * - under it, the next-ranked units whose cost fits the room left are added, and the text is
 *   counted again (merges usually leave a few tokens free), until a round adds nothing or
 *   `maxRounds` (default 16) refill rounds have run.
 *
 * Ranking is a counting sort for integer priorities in a modest span, else O(n log n). A unit's
 * tokens are its `tokens`, else `count(text)` (the counter's cache answers when warm); `count` must
 * give a non-empty text at least one token, as every tokenizer does.
 */
export const fitByPriority = <U extends Prioritized>(options: {
  /** In document order. */
  readonly units: ReadonlyArray<U>
  readonly budget: number
  /** The exact counter: for the joined text, the separator, and units without `tokens`. */
  readonly count: (text: string) => number
  readonly separator?: string
  readonly maxRounds?: number
}): PriorityFit<U> => {
  const { units, budget, count } = options
  const separator = options.separator ?? "\n"
  const join = separator === "" ? 0 : count(separator)
  const n = units.length
  const { rank, required, empty } = rankByPriority(units)
  // By rank, so the passes below read memory in order; -1 until counted.
  const tokens = new Float64Array(n).fill(-1)
  let unitCounts = 0
  const tokensAt = (r: number) => {
    let t = tokens[r]!
    if (t < 0) {
      const unit = units[rank[r]!]!
      if (unit.tokens === undefined) {
        t = count(unit.text)
        unitCounts++
      } else t = unit.tokens
      tokens[r] = t
    }
    return t
  }
  const kept = new Uint8Array(n)
  // Indices of the kept units; `joined` makes the text from them in document order.
  let keptIndices: Array<number> = []
  let estimate = 0
  // Keeps ranks from `from` to `to` whose cost fits, in rank order; returns how many it kept.
  const fill = (from: number, to: number) => {
    let added = 0
    for (let r = from; r < to; r++) {
      if (kept[r] === 1) continue
      const separatorCost = keptIndices.length > 0 ? join : 0
      if (r >= required) {
        const room = budget - estimate
        if (room < separatorCost) break // nothing fits any more
        if (room < separatorCost + 1) {
          // Only an empty text still fits.
          if (empty === 0) break
          if (units[rank[r]!]!.text !== "") continue
        }
      }
      const cost = tokensAt(r) + separatorCost
      if (r < required || estimate + cost <= budget) {
        estimate += cost
        kept[r] = 1
        keptIndices.push(rank[r]!)
        added++
      }
    }
    return added
  }
  const joined = () => {
    keptIndices.sort((a, b) => a - b)
    const texts = new Array<string>(keptIndices.length)
    for (let k = 0; k < keptIndices.length; k++) texts[k] = units[keptIndices[k]!]!.text
    return texts.join(separator)
  }

  fill(0, n)
  let text = joined()
  let total = count(text)
  let wholeCounts = 1
  // Ranks at and below `floor` are out for good: the repair dropped them or one ranked above them.
  let floor = n
  let fits = true
  let settled = false
  let rounds = options.maxRounds ?? 16
  for (;;) {
    if (total > budget) {
      let excess = total - budget
      let dropped = 0
      for (let r = floor - 1; r >= required && excess > 0; r--) {
        if (kept[r] === 0) continue
        kept[r] = 0
        excess -= tokens[r]! + join
        floor = r
        dropped++
      }
      if (dropped === 0) {
        fits = false
        break
      }
      keptIndices = []
      for (let r = 0; r < floor; r++) if (kept[r] === 1) keptIndices.push(rank[r]!)
    } else {
      if (rounds-- <= 0) break
      // Room by the estimate, from the exact total: what merges saved comes back here.
      estimate = total
      if (fill(required, floor) === 0) {
        settled = true
        break
      }
    }
    text = joined()
    total = count(text)
    wholeCounts++
  }
  // keptIndices is in document order here (`joined` sorted it, and nothing was added since).
  const included = new Array<U>(keptIndices.length)
  const dropped = new Array<U>(n - keptIndices.length)
  let k = 0
  for (let i = 0; i < n; i++) {
    if (keptIndices[k] === i) included[k++] = units[i]!
    else dropped[i - k] = units[i]!
  }
  return { included, dropped, text, total, fits, settled, wholeCounts, unitCounts }
}

/**
 * Unit indices best first (required, then higher priority, then earlier), how many are required
 * and how many texts are empty. Integer priorities spanning at most a few times as many values as
 * there are units (scores, levels) go through a counting sort, O(n + span); any others through a
 * comparator sort, O(n log n).
 */
const rankByPriority = (
  units: ReadonlyArray<Prioritized>
): { readonly rank: Uint32Array; readonly required: number; readonly empty: number } => {
  const n = units.length
  const rank = new Uint32Array(n)
  let max = Number.NEGATIVE_INFINITY
  let min = Number.POSITIVE_INFINITY
  let integers = true
  let required = 0
  let empty = 0
  for (let i = 0; i < n; i++) {
    const unit = units[i]!
    const p = unit.priority ?? 0
    if (unit.required) required++
    if (unit.text === "") empty++
    if (!Number.isInteger(p)) integers = false
    if (p > max) max = p
    if (p < min) min = p
  }
  // Class 0 is required; class 1 + (max - p) holds priority p, so classes ascend as ranks do.
  const span = max - min + 2
  if (n > 0 && integers && span <= 4 * n + 1024) {
    const classOf = (unit: Prioritized) => (unit.required ? 0 : 1 + max - (unit.priority ?? 0))
    const starts = new Uint32Array(span + 1)
    for (let i = 0; i < n; i++) starts[classOf(units[i]!) + 1]!++
    for (let c = 1; c <= span; c++) starts[c]! += starts[c - 1]!
    // Indices ascend within a class: ties keep their original order.
    for (let i = 0; i < n; i++) rank[starts[classOf(units[i]!)]!++] = i
    return { rank, required, empty }
  }
  const order = Array.from({ length: n }, (_, i) => i)
  const requiredFirst = (u: Prioritized) => (u.required ? 1 : 0)
  order.sort((a, b) => {
    const ua = units[a]!
    const ub = units[b]!
    return requiredFirst(ub) - requiredFirst(ua) || (ub.priority ?? 0) - (ua.priority ?? 0) || a - b
  })
  rank.set(order)
  return { rank, required, empty }
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
