/**
 * Stage "select blocks": which blocks and turns go in, under the model's budget (`@ctxo/budget`).
 * Every layer is units; the budget grants each source its share (the manifest's `budget.shares`
 * replace the defaults), fits whole units, counts the assembled request once and repairs it.
 *
 * Required, never cut: the system prompt (with the session's prompt), the input (or the running
 * turn), the rules (CODE_LAW.md) and pinned turns (reduced when they do not fit whole). When they
 * alone do not fit, the compile is a `BudgetExceeded`.
 *
 * History is planned before the other sources take their shares, so that every earlier turn is
 * either in the request or accounted for:
 *
 * 1. summaries first (the cheaper cover): the newest that fit their share (at least the newest,
 *    when it fits at all), and a note that older ones are kept on file when any is left out;
 * 2. recent turns, contiguous from the newest: as many as fit reduced (tool results as
 *    placeholders naming the call and the file the full result is in; input and answer kept),
 *    then, newest first, each shown whole when that still fits the history's grant;
 * 3. earlier turns that are neither shown nor covered by a shown summary (they did not fit even
 *    reduced; archived by a compaction whose summary failed; beyond `chatHistory.maxTurns`) are
 *    named in a short note with where they are on file.
 *
 * The notes go in `compression__context`; the ledger says which turns were reduced (`cut`) or left
 * out, and why. Hysteresis: turns covered by a shown summary may be cut (to 80% of the grant) and
 * the cut kept while it fits, so the cached prefix stays; a turn no shown summary covers is never
 * cut while it fits reduced.
 */

import { allocate, availableInput, DEFAULT_SHARES } from "@ctxo/budget/Allocation"
import type { FittedRequest, SourceInput } from "@ctxo/budget/Budget"
import { fitBudget } from "@ctxo/budget/Budget"
import type { BudgetExceeded } from "@ctxo/budget/BudgetErrors"
import type { UnitLedger } from "@ctxo/budget/BudgetReport"
import { ledgerRow } from "@ctxo/budget/Fit"
import type { ModelInfo } from "@ctxo/budget/ModelRegistry"
import type { Counter } from "@ctxo/budget/Tokenizer"
import { leftOutTurnsNote, olderSummariesNote, reduceTurn } from "@ctxo/history/HistoryView"
import type { Summary } from "@ctxo/history/Message"
import { type Turn, turnWords } from "@ctxo/history/Turns"
import { Either } from "effect"
import type { CompileState } from "../Compile.ts"
import type { Manifest } from "../Manifest.ts"
import type { ContextUnit } from "../Sources.ts"
import type { Ranker } from "../ToolSelection.ts"
import type { Formatter } from "./format.ts"
import type { CompileUnit, Counting } from "./units.ts"

export interface Selection {
  readonly fitted: FittedRequest<CompileUnit>
  /** The oldest earlier turn shown (not pinned), when there is one. */
  readonly historyStartTurn: number | undefined
  /** Earlier turns shown reduced, and earlier turns left out with no shown summary (in the note). */
  readonly reducedTurns: ReadonlyArray<number>
  readonly leftOutTurns: ReadonlyArray<number>
}

/** The history a compile may show, as the resolve stage found it. */
export interface HistoryInput {
  /** Turns offered, oldest first (the running one not among them). */
  readonly turns: ReadonlyArray<Turn>
  /** Earlier turns the manifest's strategy does not offer (`chatHistory.maxTurns`). */
  readonly notOffered: ReadonlyArray<number>
  /** Stored summaries, oldest first. */
  readonly summaries: ReadonlyArray<Summary>
  /** Earlier turns archived by compaction (covered by a summary, or not when it failed). */
  readonly archivedTurns: ReadonlyArray<number>
  /** The history file, relative to the session (notes and placeholders name it). */
  readonly file: string
  /** The composer shows earlier turns (a map-reduce role gets none). */
  readonly shown: boolean
  /** The composer shows `compression__context` (not with sharing off). */
  readonly summariesShown: boolean
}

const NOTE_ID = "history-note"
/** At most this many earlier turns are recalled into one request. */
const MAX_RECALLED = 24

/** What recall reads and shows of a turn: its words (input and the assistant's text, no tool traffic). */
const recallTextOf = turnWords

/** Fraction of the history grant a cut over summarized turns keeps (hysteresis). */
const CUT_RATIO = 0.8

/** The flags of a required turn unit (one object: asked for every turn of every plan). */
const REQUIRED = { required: true } as const
const isPinned = (t: Turn) => t.messages.some((m) => m.meta.pinned === true)
const sum = (units: ReadonlyArray<{ readonly tokens: number }>) => units.reduce((n, u) => n + u.tokens, 0)

export const selectBlocks = (options: {
  readonly model: ModelInfo & { readonly requested?: string; readonly fallback?: string }
  readonly counter: Counter
  readonly counting: Counting
  readonly formatter: Formatter
  readonly manifest: Manifest
  readonly systemPrompt: string
  /** The new input ("" when a running turn is answered). */
  readonly input: string
  /** The running turn as it is to be shown. */
  readonly running?: Turn | undefined
  /** The collectors' units (summaries among them as `compression__context`). */
  readonly units: ReadonlyArray<ContextUnit>
  /** The tools wanted, most wanted first (the client's required), as units of the tools source. */
  readonly tools?: ReadonlyArray<CompileUnit>
  readonly history: HistoryInput
  readonly previous?: CompileState | undefined
  /** The input relevance is judged on, and how (recalled turns). */
  readonly recall?: { readonly query: string; readonly rank: Ranker }
}): Either.Either<Selection, BudgetExceeded> => {
  const { model, counter, counting, formatter, manifest, history } = options
  const budgetOptions = {
    ...(manifest.budget.outputReserve === undefined ? {} : { outputReserve: manifest.budget.outputReserve }),
    ...(manifest.budget.outputReserveRatio === undefined
      ? {}
      : { outputReserveRatio: manifest.budget.outputReserveRatio }),
    ...(manifest.budget.shares === undefined ? {} : { shares: manifest.budget.shares })
  }
  const { available } = availableInput({
    window: model.contextWindow,
    maxInput: model.maxInput,
    margin: counter.margin,
    ...budgetOptions
  })
  const required = (u: CompileUnit): CompileUnit => (u.required === true ? u : { ...u, required: true })

  // The required layers.
  const contexts = options.units.map(counting.context)
  const systemUnits = [
    counting.system(options.systemPrompt),
    ...contexts.filter((u) => u.source === "system_prompt").map(required)
  ]
  const inputUnits = [
    counting.query(options.input),
    ...(options.running === undefined
      ? []
      : [counting.turn(options.running, "user_input", { running: true, required: true })])
  ]
  const rulesUnits = contexts.filter((u) => u.source === "rules").map(required)
  const clientTools = (options.tools ?? []).filter((u) => u.required === true)
  const offeredTools = (options.tools ?? []).filter((u) => u.required !== true)
  const summaryUnits = history.summariesShown ? contexts.filter((u) => u.source === "summaries") : []
  const otherContexts = contexts.filter(
    (u) => u.source !== "system_prompt" && u.source !== "rules" && u.source !== "summaries"
  )
  const offered = history.shown ? history.turns : []
  const pinnedTurns: Array<Turn> = []
  const walkTurns: Array<Turn> = []
  for (const t of offered) (isPinned(t) ? pinnedTurns : walkTurns).push(t)
  /** Whether these units of the walk show every one of its turns (each unit is a distinct turn of it). */
  const showsEvery = (units: ReadonlyArray<CompileUnit>) => units.length === walkTurns.length
  const baseTokens = sum(systemUnits) + sum(inputUnits) + sum(rulesUnits) + sum(clientTools)
  const reduced = (t: Turn) => reduceTurn(t, { historyFile: history.file })
  // Pinned turns whole, or reduced when whole they would leave less of history covered.
  const pinnedWhole = pinnedTurns.map((t) => counting.turn(t, "pinned_history", REQUIRED))
  const pinnedReduced = pinnedTurns.map((t) => {
    const r = reduced(t)
    return r === t
      ? counting.turn(t, "pinned_history", REQUIRED)
      : counting.turn(r, "pinned_history", { required: true, reduced: true })
  })
  let pinnedUnits: ReadonlyArray<CompileUnit> = pinnedWhole
  let requiredTokens = baseTokens + sum(pinnedUnits)

  const otherBySource = new Map<string, Array<CompileUnit>>()
  for (const u of [...offeredTools, ...otherContexts])
    otherBySource.set(u.source, [...(otherBySource.get(u.source) ?? []), u])
  const sourcesWith = (plan: HistoryPlan | undefined): Array<SourceInput<CompileUnit>> => [
    { id: "system_prompt", required: true, units: systemUnits },
    { id: "user_input", required: true, units: inputUnits },
    ...(rulesUnits.length === 0 ? [] : [{ id: "rules", required: true, units: rulesUnits }]),
    ...(clientTools.length === 0 ? [] : [{ id: "client_tools", required: true, units: clientTools }]),
    ...(pinnedUnits.length === 0 ? [] : [{ id: "pinned_history", required: true, units: pinnedUnits }]),
    ...(plan === undefined || plan.summaries.length === 0
      ? []
      : [{ id: "summaries", required: true, units: plan.summaries }]),
    ...(plan === undefined || plan.recall.length === 0
      ? []
      : [{ id: "recalled_history", required: true, units: plan.recall }]),
    ...[...otherBySource].map(([id, list]) => ({ id, units: list })),
    ...(plan === undefined || plan.turns.length === 0
      ? []
      : [{ id: "recent_history", required: true, contiguous: true, units: plan.turns }])
  ]
  const fitWith = (sources: ReadonlyArray<SourceInput<CompileUnit>>) =>
    fitBudget({
      model,
      counter,
      ...budgetOptions,
      sources,
      countTotal: (included) =>
        Either.match(formatter.compose(included), {
          onLeft: () => Number.POSITIVE_INFINITY,
          onRight: (composition) => counting.countRequest(formatter.render(composition))
        })
    })

  const share = (id: string) => manifest.budget.shares?.[id] ?? DEFAULT_SHARES[id] ?? 0
  /**
   * The history's grant when the others take their shares (its ask: every offered turn whole).
   * A plan asks it twice or more with the same numbers (whether every turn fits whole, then how far
   * reduced turns may grow back): the last answer is kept. It depends on the pinned units too.
   */
  let lastGrant: { reserved: number; ask: number; required: number; grant: number } | undefined
  const historyGrant = (reserved: number, ask: number) => {
    if (lastGrant?.reserved === reserved && lastGrant.ask === ask && lastGrant.required === requiredTokens)
      return lastGrant.grant
    const grant = grantOf(reserved, ask)
    lastGrant = { reserved, ask, required: requiredTokens, grant }
    return grant
  }
  const grantOf = (reserved: number, ask: number) =>
    Either.match(
      allocate({
        model: model.id,
        window: model.contextWindow,
        maxInput: model.maxInput,
        margin: counter.margin,
        ...budgetOptions,
        sources: [
          { id: "required", required: true, ask: requiredTokens + reserved },
          ...[...otherBySource].map(([id, list]) => ({ id, ask: sum(list) })),
          { id: "recent_history", ask }
        ]
      }),
      { onLeft: () => 0, onRight: (a) => a.grants.recent_history ?? 0 }
    )

  // Turns as units: whole (the counting keeps a turn's unit from compile to compile), and reduced,
  // made once per compile when asked; required as the plan shows them (the plan chooses which).
  const reducedUnits = new Map<Turn, CompileUnit>()
  const wholeOf = (t: Turn) => counting.turn(t, "recent_history", REQUIRED)
  /** Tokens of these turns whole (each unit kept by the counting: summed, no list of them made). */
  const wholeTokens = (turns: ReadonlyArray<Turn>) => {
    let n = 0
    for (const t of turns) n += wholeOf(t).tokens
    return n
  }
  /** A turn's smallest form: reduced, unless its placeholders take more than the results they replace. */
  const reducedOf = (t: Turn) => {
    let u = reducedUnits.get(t)
    if (u === undefined) {
      const r = reduced(t)
      const whole = wholeOf(t)
      u = r === t ? whole : counting.turn(r, "recent_history", { reduced: true, required: true })
      if (u.tokens >= whole.tokens) u = whole
      reducedUnits.set(t, u)
    }
    return u
  }

  const summaryCap = Math.floor(share("important_history") * available)
  const coveredBy = (shown: ReadonlyArray<CompileUnit>, turn: number) =>
    summaryUnits.length === 0
      ? undefined
      : history.summaries.find(
          (s) => s.fromTurn <= turn && turn <= s.toTurn && shown.some((u) => u.id === s.id)
        )
  const previousStart = options.previous?.historyStartTurn

  // Recall (seed 003 memory shares): earlier turns recency cannot show, ranked by relevance to
  // the input, brought back whole into the shares of important history and semantic memory.
  // Ranked only when a plan leaves a turn out that recall could bring back (a plan that shows
  // every turn recalls none, and most compiles of a session within its window are such).
  let ranked: ReadonlyArray<Turn> | undefined
  const recallHits = (): ReadonlyArray<Turn> => (ranked ??= rankedTurns())
  const rankedTurns = (): ReadonlyArray<Turn> => {
    const query = options.recall?.query ?? ""
    if (options.recall === undefined || query.trim() === "" || !history.shown || !history.summariesShown)
      return []
    // Live turns only: archived ones are covered by their summary, and bringing them back would
    // undo the room compaction made (memory levels carry what matters of them).
    const candidates = walkTurns.filter((t) => t.finished)
    const docs = candidates.flatMap((t) => {
      const text = recallTextOf(t)
      return text === "" ? [] : [{ id: String(t.turn), text }]
    })
    const byNumber = new Map(candidates.map((t) => [String(t.turn), t]))
    return options.recall
      .rank(query, docs)
      .slice(0, MAX_RECALLED * 2)
      .flatMap((hit) => {
        const t = byNumber.get(hit.id)
        return t === undefined ? [] : [t]
      })
  }
  const recallCap = Math.floor((share("important_history") + share("semantic")) * available)
  const recallUnits = new Map<Turn, CompileUnit>()
  const recallUnitOf = (t: Turn) => {
    let u = recallUnits.get(t)
    if (u === undefined) {
      const unit = counting.note(
        "recall__context",
        `recalled-turn-${t.turn}`,
        `Earlier turn ${t.turn}, recalled as relevant to this input (it is not in the conversation as shown):\n${recallTextOf(t)}`,
        "recalled_history"
      )
      u = { ...required(unit), ...(unit.kind === "context" ? { position: t.turn } : {}) }
      recallUnits.set(t, u)
    }
    return u
  }
  /** Recall brings back only finished turns the plan does not show: a plan showing them all needs none. */
  const showsEveryFinishedTurn = (plan: HistoryPlan) => {
    if (showsEvery(plan.turns)) return true
    const shown = new Set(plan.turns.flatMap((u) => (u.kind === "turn" ? [u.turn.turn] : [])))
    return walkTurns.every((t) => !t.finished || shown.has(t.turn))
  }
  /** The most relevant turns the plan does not show, best first, within `room`. */
  const recallWithin = (plan: HistoryPlan, room: number): ReadonlyArray<CompileUnit> => {
    const shown = new Set(plan.turns.flatMap((u) => (u.kind === "turn" ? [u.turn.turn] : [])))
    const out: Array<CompileUnit> = []
    let used = 0
    for (const t of recallHits()) {
      if (out.length >= MAX_RECALLED) break
      if (shown.has(t.turn)) continue
      const u = recallUnitOf(t)
      if (used + u.tokens > room) continue
      out.push(u)
      used += u.tokens
    }
    return out
  }

  /**
   * The history within `free` tokens: summaries, turns (whole or reduced), the note, and the
   * turns recalled by relevance when recency leaves relevant ones out (their room taken from the
   * turns beyond the recent-history share, what recall does not use given back).
   */
  let recallOn = false
  const planWithin = (free: number): HistoryPlan => {
    const plain = planTurns(free)
    if (!recallOn || showsEveryFinishedTurn(plain) || recallHits().length === 0) return plain
    const wanted = recallWithin(plain, Math.min(recallCap, free))
    if (wanted.length === 0) return plain
    // The newest turns keep what they take up to their own share (recent history, 18%): recall
    // has only the rest, so a tight request never trades the newest turns for recalled ones.
    const recentFloor = Math.min(sum(plain.turns), Math.floor(share("recent_history") * available))
    let room = Math.min(
      recallCap,
      free - sum(plain.summaries) - recentFloor,
      sum(recallWithin({ ...plain, turns: [] }, recallCap))
    )
    if (room <= 0) return plain
    let plan = planTurns(free - room)
    let recall = recallWithin(plan, room)
    // What recall does not use goes back to the turns, until neither changes: more turns shown
    // means fewer turns to recall, never more.
    for (let used = sum(recall), round = 0; used < room && round < 4; round++) {
      plan = planTurns(free - used)
      recall = recallWithin(plan, used)
      const now = sum(recall)
      if (now === used) break
      room = used
      used = now
    }
    return { ...plan, recall }
  }

  /** The history within `free` tokens: summaries, turns (whole or reduced), the note. */
  const planTurns = (free: number): HistoryPlan => {
    let noteReserve = 0
    let plan: HistoryPlan | undefined
    for (let round = 0; round < 4; round++) {
      const room = Math.max(0, free - noteReserve)
      // 1. the newest summary: the cheapest cover of what compaction archived.
      const newestFirst = [...summaryUnits].reverse()
      const shownSummaries: Array<CompileUnit> = []
      let used = 0
      if (newestFirst[0] !== undefined && newestFirst[0].tokens <= room) {
        shownSummaries.push(newestFirst[0])
        used = newestFirst[0].tokens
      }
      const covered = (t: Turn) => coveredBy(shownSummaries, t.turn) !== undefined
      let candidates = walkTurns
      // A previous cut applies when it leaves some offered turns out and keeps some: looked at
      // with one pass of comparisons, the kept turns copied and summed only then.
      let before = false
      let after = false
      if (previousStart !== undefined)
        for (const t of candidates) {
          if (t.turn < previousStart) before = true
          else after = true
          if (before && after) break
        }
      if (previousStart !== undefined && before && after) {
        // The previous cut over summarized turns, kept while what follows it fits whole.
        const kept = candidates.filter((t) => t.turn >= previousStart)
        const keptWhole = wholeTokens(kept)
        if (
          candidates.filter((t) => t.turn < previousStart).every(covered) &&
          keptWhole <= Math.min(room - used, historyGrant(used + noteReserve, keptWhole))
        )
          candidates = kept
      }
      const askWhole = wholeTokens(candidates)
      const allWhole = askWhole <= Math.min(room - used, historyGrant(used + noteReserve, askWhole))
      // 2. the turns, contiguous from the newest: all whole when they fit the history's grant, else
      // as many as fit reduced (a turn no shown summary covers is never cut while it fits so).
      let newest = [...candidates].reverse()
      let cover = askWhole
      let count = newest.length
      if (!allWhole) {
        // Hysteresis over summarized turns: cut them (oldest first) to 80% of the grant.
        const cut = historyGrant(used + noteReserve, askWhole) * CUT_RATIO
        let from = 0
        let whole = askWhole
        while (from < candidates.length && covered(candidates[from]!) && whole > cut) {
          whole -= wholeOf(candidates[from]!).tokens
          from++
        }
        newest = candidates.slice(from).reverse()
        count = 0
        cover = 0
        for (const t of newest) {
          const r = reducedOf(t).tokens
          if (used + cover + r > room) break
          cover += r
          count++
        }
      }
      // 3. older summaries, newest first, within their share (the newest counts against it).
      const limit = Math.max(summaryCap, used)
      for (const u of newestFirst.slice(1)) {
        if (used + u.tokens > limit || used + u.tokens + cover > room) break
        shownSummaries.unshift(u)
        used += u.tokens
      }
      // 4. reduced turns shown whole, newest first, where the history's grant allows.
      const left = room - used
      const grant = Math.min(left, historyGrant(used + noteReserve, askWhole))
      const chosen = allWhole
        ? newest.map(wholeOf)
        : newest.slice(0, count).map((t) => {
            const w = wholeOf(t)
            const r = reducedOf(t)
            if (w === r || cover - r.tokens + w.tokens > Math.max(grant, cover)) return r
            cover += w.tokens - r.tokens
            return w
          })
      // 5. the note: left-out turns no shown summary covers, and summaries kept on file.
      const someShown = shownSummaries.length > 0
      const onFileOnly = (turn: number) =>
        someShown && history.summaries.some((s) => s.fromTurn <= turn && turn <= s.toTurn)
      // Every offered turn shown and none elsewhere: none left out.
      const noneLeftOut =
        showsEvery(chosen) && history.notOffered.length === 0 && history.archivedTurns.length === 0
      const shownTurns = noneLeftOut
        ? undefined
        : new Set([...chosen, ...pinnedUnits].map((u) => (u.kind === "turn" ? u.turn.turn : -1)))
      const leftOut =
        shownTurns === undefined
          ? []
          : [...history.notOffered, ...history.archivedTurns, ...walkTurns.map((t) => t.turn)].filter(
              (turn) =>
                !shownTurns.has(turn) && coveredBy(shownSummaries, turn) === undefined && !onFileOnly(turn)
            )
      const older = summaryUnits.length - shownSummaries.length
      const noteText = [
        someShown && older > 0 ? olderSummariesNote(older) : "",
        leftOutTurnsNote(leftOut, history.file)
      ]
        .filter((t) => t !== "")
        .join("\n\n")
      const note =
        noteText === "" || !history.summariesShown
          ? undefined
          : required(counting.note("compression__context", NOTE_ID, noteText, "summaries"))
      plan = {
        summaries: [...(note === undefined ? [] : [note]), ...shownSummaries.map(required)],
        // Turn units are required as counted (wholeOf, reducedOf).
        turns: chosen,
        shownSummaries,
        recall: [],
        leftOut: [...new Set(leftOut)].sort((a, b) => a - b),
        grant,
        left
      }
      const noteTokens = note?.tokens ?? 0
      if (noteTokens <= noteReserve) break
      noteReserve = noteTokens
    }
    return plan!
  }

  /** The plan and fit with these pinned units; the refusal when the required layers do not fit. */
  const attempt = (pinned: ReadonlyArray<CompileUnit>) => {
    pinnedUnits = pinned
    requiredTokens = baseTokens + sum(pinned)
    // The required layers alone do not fit: the budget's refusal, with its numbers.
    if (requiredTokens > available) {
      const refused = fitWith(sourcesWith(undefined))
      if (Either.isLeft(refused)) return { fitted: refused, plan: undefined, pinned }
    }
    let free = available - requiredTokens - counting.requestBase
    let plan = planWithin(free)
    let fitted = fitWith(sourcesWith(plan))
    // The exact count of the assembled request can exceed the sum of its units: plan with less.
    for (let retry = 0; Either.isLeft(fitted) && retry < 4; retry++) {
      const over = Math.max(8, fitted.left.required - fitted.left.available)
      if (plan.turns.length === 0 && plan.summaries.length === 0 && plan.recall.length === 0) break
      free = Math.max(0, free - over)
      plan = planWithin(free)
      fitted = fitWith(sourcesWith(plan))
    }
    return { fitted, plan, pinned }
  }
  // Pinned turns whole or reduced is decided on the history alone (recall takes its room after).
  const pinnedChoice = pinnedReduced.some((u) => u.kind === "turn" && u.reduced === true)
  recallOn = !pinnedChoice
  let best = attempt(pinnedWhole)
  if (pinnedChoice && (Either.isLeft(best.fitted) || (best.plan?.leftOut.length ?? 0) > 0)) {
    const other = attempt(pinnedReduced)
    if (
      Either.isRight(other.fitted) &&
      (Either.isLeft(best.fitted) || other.plan!.leftOut.length < best.plan!.leftOut.length)
    )
      best = other
  }
  if (pinnedChoice && Either.isRight(best.fitted) && recallHits().length > 0) {
    recallOn = true
    const withRecall = attempt(best.pinned)
    if (Either.isRight(withRecall.fitted)) best = withRecall
  }
  pinnedUnits = best.pinned
  requiredTokens = baseTokens + sum(best.pinned)
  const fitted = best.fitted
  if (Either.isLeft(fitted)) return Either.left(fitted.left)
  // A fit always comes with its plan (only a refusal has none).
  const plan = best.plan!

  // The ledger: reduced turns, turns and summaries left out, and why.
  const final = plan
  const offeredLedger: Array<UnitLedger> = []
  let stoppedAt: number | undefined
  // Every offered turn shown: none to account for (and no set of the shown ones made).
  const shownIds = showsEvery(final.turns) ? undefined : new Set(final.turns.map((u) => u.id))
  for (const t of shownIds === undefined ? [] : [...walkTurns].reverse()) {
    const w = wholeOf(t)
    if (shownIds!.has(w.id)) continue
    const summary = coveredBy(final.shownSummaries, t.turn)
    const reason =
      summary !== undefined
        ? `covered by summary ${summary.id} (turns ${summary.fromTurn}-${summary.toTurn}) shown in the request; the history cut over summarized turns is kept while it fits`
        : stoppedAt === undefined
          ? `does not fit even reduced (${reducedOf(t).tokens} tokens reduced, ${final.left} left for history); named in the request's note, on file in ${history.file}`
          : `older than turn ${stoppedAt}, which does not fit even reduced (history stays contiguous); named in the request's note, on file in ${history.file}`
    if (summary === undefined) stoppedAt ??= t.turn
    offeredLedger.push(ledgerRow(w, "dropped", counter.method, reason))
  }
  for (const u of summaryUnits)
    if (!final.shownSummaries.includes(u))
      offeredLedger.push(
        ledgerRow(
          u,
          "dropped",
          counter.method,
          "an older summary left out to fit the budget (the newest that fit are shown); kept on file, as the request's note says"
        )
      )
  if (!history.shown)
    for (const t of history.turns)
      offeredLedger.push(
        ledgerRow(wholeOf(t), "dropped", counter.method, `a ${manifest.process.role} gets no earlier turns`)
      )
  const report = fitted.right.report
  // Reduced turns shown are in the ledger as cut, with what they would take whole.
  const shownUnits = new Map<string, Extract<CompileUnit, { readonly kind: "turn" }>>()
  const reducedTurns: Array<number> = []
  for (const shown of [final.turns, pinnedUnits])
    for (const u of shown)
      if (u.kind === "turn" && u.reduced === true) {
        shownUnits.set(`${u.source}\u0000${u.id}`, u)
        reducedTurns.push(u.turn.turn)
      }
  // The offered turns by number (a history's turns have distinct numbers), for a reduced turn's
  // whole form; made only when one is shown.
  const offeredByNumber = shownUnits.size === 0 ? undefined : new Map(offered.map((t) => [t.turn, t]))
  const units =
    offeredByNumber === undefined
      ? report.units
      : report.units.map((row) => {
          const unit = shownUnits.get(`${row.source}\u0000${row.id}`)
          if (unit === undefined || row.status !== "included") return row
          const whole =
            unit.source === "pinned_history"
              ? undefined
              : wholeOf(offeredByNumber.get(unit.turn.turn) ?? unit.turn)
          return {
            ...row,
            status: "cut" as const,
            reason: `reduced to fit the budget: tool results shown as placeholders naming the call and the file the full result is in, long step text cut (${unit.tokens} tokens${whole === undefined ? "" : ` instead of ${whole.tokens} whole, the history's grant being ${final.grant}`})`
          }
        })
  let historyStartTurn: number | undefined
  for (const u of final.turns)
    if (u.kind === "turn" && (historyStartTurn === undefined || u.turn.turn < historyStartTurn))
      historyStartTurn = u.turn.turn
  return Either.right({
    fitted: {
      ...fitted.right,
      report: { ...report, units: offeredLedger.length === 0 ? units : [...units, ...offeredLedger] }
    },
    historyStartTurn,
    reducedTurns: reducedTurns.sort((a, b) => a - b),
    leftOutTurns: final.leftOut
  })
}

interface HistoryPlan {
  /** The note (first, when there is one) and the summaries shown, oldest first. */
  readonly summaries: ReadonlyArray<CompileUnit>
  /** The turns shown, newest first. */
  readonly turns: ReadonlyArray<CompileUnit>
  readonly shownSummaries: ReadonlyArray<CompileUnit>
  /** Earlier turns recalled by relevance (not shown in the conversation), best first. */
  readonly recall: ReadonlyArray<CompileUnit>
  readonly leftOut: ReadonlyArray<number>
  /** The history's grant (whole turns) and what was left for history after the summaries. */
  readonly grant: number
  readonly left: number
}
