/**
 * The ledger every compile carries: where each token went and why. Plain data (effect/Schema) so
 * it crosses HTTP, lands in eval reports and renders for people with `explain`.
 */
import { Schema } from "effect"

export const CountMethod = Schema.Literal("exact", "estimate")
export type CountMethod = typeof CountMethod.Type

export const UnitStatus = Schema.Literal("included", "cut", "dropped")
export type UnitStatus = typeof UnitStatus.Type

/** One source (system prompt, history, knowledge, ...): what it was promised, asked for and got. */
export const SourceLedger = Schema.Struct({
  id: Schema.String,
  required: Schema.Boolean,
  priority: Schema.Number,
  /** Fraction of the available budget this source is promised. */
  share: Schema.Number,
  /** `share × available`, rounded down: the source's guaranteed budget (required sources: their ask). */
  cap: Schema.Number,
  /** Tokens the source asked for (everything it has). */
  ask: Schema.Number,
  /** Tokens granted: the cap or less, plus surplus received. */
  grant: Schema.Number,
  /** Tokens the source's included units actually take. */
  used: Schema.Number,
  /** Unused guaranteed budget this source left to the others. */
  surplusGiven: Schema.Number,
  /** Budget this source got beyond its cap from others' surplus. */
  surplusReceived: Schema.Number,
  /** Its units not sent whole: how many, and the tokens of those left out entirely. */
  cut: Schema.optional(Schema.Struct({ units: Schema.Number, tokens: Schema.Number })),
  /** Why (the distinct reasons of those units, at most three). */
  why: Schema.optional(Schema.Array(Schema.String))
})
export type SourceLedger = typeof SourceLedger.Type

/** One unit (a block, a turn, a line range, a message): its tokens and fate. */
export const UnitLedger = Schema.Struct({
  id: Schema.String,
  source: Schema.String,
  ref: Schema.optional(Schema.String),
  hash: Schema.String,
  tokens: Schema.Number,
  counted: CountMethod,
  status: UnitStatus,
  reason: Schema.optional(Schema.String)
})
export type UnitLedger = typeof UnitLedger.Type

export const BudgetReport = Schema.Struct({
  model: Schema.String,
  tokenizer: Schema.Struct({
    name: Schema.String,
    method: CountMethod,
    /** Safety margin kept for estimated counts (fraction of the budget), 0 for exact ones. */
    margin: Schema.Number
  }),
  window: Schema.Struct({ tokens: Schema.Number, source: Schema.String }),
  maxInput: Schema.Number,
  outputReserve: Schema.Number,
  /** Input tokens the sources may share: min(window - reserve, maxInput), less the margin. */
  available: Schema.Number,
  sources: Schema.Array(SourceLedger),
  units: Schema.Array(UnitLedger),
  /** Tokens of the final assembled request, counted once, whole. */
  total: Schema.optional(Schema.Number),
  /** What the final exact count made the repair step drop or add back. */
  repairs: Schema.Array(
    Schema.Struct({
      action: Schema.Literal("dropped", "restored"),
      unit: Schema.String,
      totalBefore: Schema.Number,
      totalAfter: Schema.Number
    })
  )
})
export type BudgetReport = typeof BudgetReport.Type

const pad = (value: string | number, width: number) => String(value).padStart(width)

/**
 * The report with each source's `cut` and `why` filled from its units: how many were not sent
 * whole (cut or dropped), the tokens of those dropped, and the distinct reasons (at most three).
 */
export const withCuts = (report: BudgetReport): BudgetReport => {
  const bySource = new Map<string, { units: number; tokens: number; why: Array<string> }>()
  for (const u of report.units) {
    if (u.status === "included") continue
    const entry = bySource.get(u.source) ?? { units: 0, tokens: 0, why: [] }
    entry.units++
    if (u.status === "dropped") entry.tokens += u.tokens
    const reason = u.reason ?? u.status
    if (entry.why.length < 3 && !entry.why.includes(reason)) entry.why.push(reason)
    bySource.set(u.source, entry)
  }
  return {
    ...report,
    sources: report.sources.map((s) => {
      const entry = bySource.get(s.id)
      return entry === undefined
        ? s
        : { ...s, cut: { units: entry.units, tokens: entry.tokens }, why: entry.why }
    })
  }
}

/** The report as a person reads it in a terminal. */
export const explain = (report: BudgetReport): string => {
  const lines = [
    `model ${report.model}: window ${report.window.tokens} (${report.window.source}), max input ${report.maxInput}, output reserve ${report.outputReserve}`,
    `tokenizer ${report.tokenizer.name} (${report.tokenizer.method}${report.tokenizer.margin > 0 ? `, margin ${(report.tokenizer.margin * 100).toFixed(1)}%` : ""}); available ${report.available}${report.total === undefined ? "" : `; final request ${report.total}`}`,
    "",
    `${"source".padEnd(20)} ${pad("share", 6)} ${pad("cap", 8)} ${pad("ask", 8)} ${pad("grant", 8)} ${pad("used", 8)} ${pad("+recv", 7)} ${pad("-gave", 7)} ${pad("cut", 5)}`
  ]
  for (const s of report.sources) {
    lines.push(
      `${(s.id + (s.required ? " *" : "")).padEnd(20)} ${pad(`${(s.share * 100).toFixed(0)}%`, 6)} ${pad(s.cap, 8)} ${pad(s.ask, 8)} ${pad(s.grant, 8)} ${pad(s.used, 8)} ${pad(s.surplusReceived, 7)} ${pad(s.surplusGiven, 7)} ${pad(s.cut?.units ?? 0, 5)}`
    )
  }
  const notIncluded = report.units.filter((u) => u.status !== "included")
  if (notIncluded.length > 0) {
    lines.push("", "not included:")
    for (const u of notIncluded) {
      lines.push(
        `  ${u.status} ${u.source}/${u.id}${u.ref ? ` [${u.ref}]` : ""}: ${u.tokens} tokens${u.reason ? `, ${u.reason}` : ""}`
      )
    }
  }
  for (const r of report.repairs)
    lines.push(`repair: ${r.action} ${r.unit} (${r.totalBefore} -> ${r.totalAfter})`)
  return lines.join("\n")
}
