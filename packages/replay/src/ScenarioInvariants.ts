/**
 * The invariants of many sessions, checked on what a scenario run observed (`ScenarioRun`).
 *
 * As in `Invariants.ts`, two halves kept apart: the runner measures (every compile's budget
 * ledger, every aggregate's blocks and request text, memory files before and after each step,
 * tasks before and after each distribution, L4 before and after each restart) and `check` judges.
 * The rules are written here, not read from the code they check: the promotion threshold (0.6),
 * the default shares of the budget, who a distribution must reach, the windows of the profiles
 * (`PROFILE_LIMITS`).
 *
 * | invariant | rule |
 * |---|---|
 * | `shares-respected` | every compile and aggregate: each non-required source uses at most its grant (its included units counted again), a grant beyond the source's cap is surplus it received, the cap is its share of what is available (the default shares unless the session configures others), the grants add up to at most what is available, and the request to at most the profile's available input (OpenAI profiles recounted with tiktoken) |
 * | `no-foreign-blocks` | no block of an aggregate comes from an ended session, a session not listed or another tenant: by the provenance it names, and by its text (no input of such a session appears in it, except a global memory of a listed session's compile, which the tenant's sessions share) |
 * | `provenance` | every block of an aggregate names its session (a listed one) and its memory level or source, in the answer and in the request the agent reads |
 * | `promotion` | every L2 entry has importance over 0.6 or is pinned; every finished turn over 0.6 is in L2 after its turn; a turn the scenario calls important is, small talk is not; the L2 of a session that ends reaches L4 |
 * | `l4-survives-restart` | L4 entries before and after a restart are identical; a turn that must draw on L4 (`fromL4`) finds an L4 entry with the text, and its request shows it |
 * | `distribution` | a distributed task reaches every session the mode and filter select (active or paused, of the tenant, not the sender) once, and no other session (an ended one, another tenant's); a retry by key adds nothing |
 * | `steps` | every step did what the scenario says: succeeded, or failed with the error it expects; a turn in a paused or ended session is refused and records nothing |
 */

import type { EnhancedState } from "@ctxo/store/Runs"
import type { TiktokenEncoding } from "tiktoken"
import { expectedAvailable, type OpenAIMessageLike, PROFILE_LIMITS, recountOpenAI } from "./Invariants.ts"

export const SCENARIO_INVARIANTS = [
  "shares-respected",
  "no-foreign-blocks",
  "provenance",
  "promotion",
  "l4-survives-restart",
  "distribution",
  "steps",
  "run-transitions",
  "run-limits",
  "run-results-once",
  "specialist-isolation",
  "run-answer-once"
] as const
export type ScenarioInvariant = (typeof SCENARIO_INVARIANTS)[number]

// --- expectations, written here and not read from the code they check

/** A turn is promoted from L1 to L2 when its importance is over 0.6 (and only then, unless pinned). */
export const PROMOTION_THRESHOLD = 0.6

/**
 * The default shares of the available budget, by source (system prompt 12%, user input 12%, tools
 * 15%, skills 10%, recent history 18%, important history 12%, semantic 6%, knowledge 10%, agent
 * output 5%): no source is promised more unless the session configures it.
 */
export const SEED_SHARES: Readonly<Record<string, number>> = {
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

/** Markers shorter than this are not looked for in aggregated text (too likely by chance). */
export const MIN_MARKER = 16

// --- evidence

/** A source's ledger row, as the compile reported it. */
export interface SourceEvidence {
  readonly id: string
  readonly required: boolean
  readonly share: number
  readonly cap: number
  readonly ask: number
  readonly grant: number
  readonly used: number
  readonly surplusReceived: number
  /** Tokens of the source's included units, added up again from the report's units. */
  readonly includedTokens: number
}

/** A memory the compile was offered: whether it was included and whether the request shows its text. */
export interface MemoryShown {
  readonly id: string
  readonly level: string
  readonly text: string
  readonly included: boolean
  readonly inRequest: boolean
}

/** One compile (a turn's step, a preview, a session's build for an aggregate) or one aggregate's fit. */
export interface BudgetEvidence {
  readonly step: number
  readonly what: "compile" | "aggregate"
  readonly tenant: string
  readonly session: string
  readonly model: string
  readonly available: number
  readonly total?: number
  /** The request recounted with tiktoken in the profile's encoding (OpenAI formats, system and user text). */
  readonly recount?: number
  readonly sources: ReadonlyArray<SourceEvidence>
  /** Tokens of units the final exact count restored into the slack (a grant may grow by them). */
  readonly restored: number
  /** Shares the session configures (`budget.shares`), when it does. */
  readonly configuredShares?: Readonly<Record<string, number>>
  readonly memory?: ReadonlyArray<MemoryShown>
  /** After how many restarts this compile ran. */
  readonly restarts: number
}

export interface SessionState {
  readonly tenant: string
  readonly id: string
  readonly state: string
  readonly concept: string
  readonly metadata: Readonly<Record<string, string>>
  /** The inputs of its turns (what the user said in it). */
  readonly inputs: ReadonlyArray<string>
}

export interface ProvenanceEvidence {
  readonly session: string
  readonly level?: string
  readonly source: string
  readonly unit: string
}

export interface AggregateBlockEvidence {
  readonly id: string
  readonly session: string
  readonly level?: string
  readonly source: string
  readonly status: string
  readonly provenance: ReadonlyArray<ProvenanceEvidence>
}

/** A block as the agent reads it in the aggregated request: the heading's provenance and the text. */
export interface RenderedSection {
  readonly heading: string
  readonly text: string
}

export interface AggregateEvidence {
  readonly step: number
  readonly tenant: string
  readonly listed: ReadonlyArray<string>
  readonly query: string
  /** Every session of every tenant when the aggregate ran. */
  readonly sessions: ReadonlyArray<SessionState>
  readonly error?: { readonly tag: string; readonly message: string }
  readonly blocks?: ReadonlyArray<AggregateBlockEvidence>
  readonly sections?: ReadonlyArray<RenderedSection>
  readonly skipped?: ReadonlyArray<{ readonly session: string; readonly reason: string }>
}

export interface MemoryEntryEvidence {
  readonly id: string
  readonly level: string
  readonly text: string
  readonly importance: number
  readonly reasons: ReadonlyArray<string>
  readonly sources: ReadonlyArray<{ readonly session: string; readonly turn?: number }>
  readonly pinned?: boolean
  readonly deletedAt?: string
}

export interface TurnEvidence {
  readonly step: number
  readonly tenant: string
  readonly session: string
  readonly input: string
  readonly stateBefore: string
  readonly turnsBefore: number
  readonly turnsAfter: number
  /** The turn's number in the session's history, when it ran. */
  readonly turn?: number
  /** Its importance by the product's rules (what L2 promotion reads). */
  readonly importance?: number
  readonly importanceReasons?: ReadonlyArray<string>
  /** The scenario's word on it. */
  readonly important?: boolean
  readonly fromL4?: ReadonlyArray<string>
  /** The session's L2 file after the turn, as written. */
  readonly l2After: ReadonlyArray<MemoryEntryEvidence>
  /** The turn's first compile's memories. */
  readonly memory?: ReadonlyArray<MemoryShown>
  readonly restarts: number
}

export interface EndEvidence {
  readonly step: number
  readonly tenant: string
  readonly session: string
  /** The session's L2 entries (not deleted) when it ended. */
  readonly l2: ReadonlyArray<MemoryEntryEvidence>
  /** L4 once the event bus had persisted the session (or the wait gave up). */
  readonly l4: ReadonlyArray<MemoryEntryEvidence>
  readonly waitedMs: number
}

export interface RestartEvidence {
  readonly step: number
  readonly advanceMs: number
  readonly before: Readonly<Record<string, ReadonlyArray<MemoryEntryEvidence>>>
  readonly after: Readonly<Record<string, ReadonlyArray<MemoryEntryEvidence>>>
}

export interface TasksOf {
  readonly tenant: string
  readonly id: string
  readonly state: string
  readonly concept: string
  readonly metadata: Readonly<Record<string, string>>
  /** Tasks with the distributed title. */
  readonly withTitle: number
}

export interface DistributionEvidence {
  readonly step: number
  readonly tenant: string
  readonly mode: "broadcast" | "filtered"
  readonly title: string
  readonly listed?: ReadonlyArray<string>
  readonly filter?: { readonly metadata?: Readonly<Record<string, string>>; readonly concept?: string }
  readonly fromSession?: string
  readonly idempotencyKey?: string
  /** A retry: an earlier step distributed the same request with the same key. */
  readonly retry: boolean
  readonly before: ReadonlyArray<TasksOf>
  readonly after: ReadonlyArray<TasksOf>
  readonly results?: ReadonlyArray<{
    readonly session: string
    readonly taskId?: string
    readonly skipped?: string
  }>
  readonly error?: { readonly tag: string; readonly message: string }
}

export interface StepEvidence {
  readonly step: number
  readonly type: string
  readonly tenant: string
  readonly session?: string
  readonly expectError?: string
  readonly error?: { readonly tag: string; readonly message: string }
  readonly ms: number
}

/** A plan-execute-reflect run as a scenario played it (seed 004). */
export interface RunEvidence {
  readonly step: number
  readonly tenant: string
  readonly session: string
  readonly goal: string
  readonly runId: string
  /** The run's state as the store kept it at the end (none: nothing was written). */
  readonly state?: EnhancedState
  /** The orchestrator's roles, in the order they were asked. */
  readonly asked: ReadonlyArray<string>
  /** The run's events, by type, in order. */
  readonly events: ReadonlyArray<string>
  /** Each specialist's first request, as texts. */
  readonly specialistContexts: ReadonlyArray<{
    readonly stepId: string
    readonly texts: ReadonlyArray<string>
  }>
  /** Inputs of the session's history opened by this run (its turn's key) whose text is the goal. */
  readonly goalInputs: number
  /** The final answers the history holds for the run's turn. */
  readonly finals: ReadonlyArray<string>
  /** Assistant messages of the session that hold the run's final answer. */
  readonly answerOccurrences: number
  readonly expect?: {
    readonly error?: string | undefined
    readonly complexity?: "simple" | "complex" | undefined
    readonly phases?: ReadonlyArray<string> | undefined
    readonly plans?: number | undefined
    readonly reflections?: number | undefined
    readonly results?: ReadonlyArray<string> | undefined
  }
}

/**
 * The seed's state diagram, written here from the seed (not read from the orchestrator): who may
 * follow whom. `failed` may follow any phase, and a resumed run goes from `failed` back to the phase
 * that failed.
 */
export const RUN_TRANSITIONS: Readonly<Record<string, ReadonlyArray<string>>> = {
  start: ["analyze"],
  analyze: ["judge"],
  judge: ["answer-directly", "plan"],
  "answer-directly": ["done"],
  plan: ["execute"],
  execute: ["collect"],
  collect: ["feedback"],
  feedback: ["reflect"],
  reflect: ["final-answer", "update-plan", "execute"],
  "update-plan": ["execute"],
  "final-answer": ["done"],
  done: []
}

export interface ScenarioEvidence {
  readonly scenario: string
  readonly model: string
  readonly steps: ReadonlyArray<StepEvidence>
  readonly budgets: ReadonlyArray<BudgetEvidence>
  readonly aggregates: ReadonlyArray<AggregateEvidence>
  readonly turns: ReadonlyArray<TurnEvidence>
  readonly ends: ReadonlyArray<EndEvidence>
  readonly restarts: ReadonlyArray<RestartEvidence>
  readonly distributions: ReadonlyArray<DistributionEvidence>
  /** Plan-execute-reflect runs (none in older evidence). */
  readonly runs?: ReadonlyArray<RunEvidence>
  /** Every session's L2 at the end of the scenario. */
  readonly finalL2: ReadonlyArray<{
    readonly tenant: string
    readonly session: string
    readonly entries: ReadonlyArray<MemoryEntryEvidence>
  }>
  /** The run itself failed (not a step: the scenario could not be played). */
  readonly failure?: string
  /** Where the data directory was left for a person to look at (`keep`). */
  readonly dataDir?: string
}

export interface ScenarioViolation {
  readonly invariant: ScenarioInvariant
  readonly scenario: string
  readonly model: string
  /** The step (0-based index in the scenario's steps; -1: the scenario as a whole). */
  readonly step: number
  readonly message: string
  readonly excerpt: string
}

type Found = Omit<ScenarioViolation, "invariant" | "scenario" | "model">

// --- helpers

const clip = (text: string, max = 100) => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

const isPinned = (e: MemoryEntryEvidence) =>
  e.pinned === true || e.reasons.some((r) => r === "pinned" || r.startsWith("pinned "))

const hasTurn = (entries: ReadonlyArray<MemoryEntryEvidence>, session: string, turn: number) =>
  entries.some((e) => e.sources.some((s) => s.session === session && s.turn === turn))

const where = (b: BudgetEvidence) =>
  b.what === "aggregate"
    ? `the aggregate (${b.model})`
    : `the compile of ${b.tenant}/${b.session} (${b.model})`

/** "s · L1 · recent_history · turn-3; t · L3 · semantic · L3:9f; and 2 more" → the named provenances. */
export const parseHeading = (
  heading: string
): ReadonlyArray<{
  readonly session: string
  readonly level?: string
  readonly rest: ReadonlyArray<string>
}> =>
  heading
    .replace(/^### From /, "")
    .split("; ")
    .filter((p) => !/^and \d+ more$/.test(p))
    // A part without " · " continues the one before (a unit's reference may hold "; ").
    .reduce<Array<string>>((parts, p) => {
      if (parts.length > 0 && !p.includes(" · ")) parts[parts.length - 1] += `; ${p}`
      else parts.push(p)
      return parts
    }, [])
    .map((p) => {
      const [session = "", ...rest] = p.split(" · ")
      const level = rest.find((x) => /^L[1-4]$/.test(x))
      return { session, ...(level === undefined ? {} : { level }), rest: rest.filter((x) => x !== level) }
    })

/** The sections of an aggregated request's text: each `### From …` heading and the text under it. */
export const sectionsOf = (texts: ReadonlyArray<string>): Array<RenderedSection> => {
  const out: Array<RenderedSection> = []
  for (const text of texts) {
    if (!text.includes("### From ")) continue
    let heading: string | undefined
    let body: Array<string> = []
    const flush = () => {
      if (heading !== undefined) out.push({ heading, text: body.join("\n").trim() })
      heading = undefined
      body = []
    }
    for (const line of text.split("\n")) {
      if (line.startsWith("### From ")) {
        flush()
        heading = line
      } else if (line.startsWith("## Session ")) flush()
      else if (heading !== undefined) body.push(line)
    }
    flush()
  }
  return out
}

/** Who a distribution must reach, by the rules of the README (not the controller's code). */
export const expectedTargets = (d: DistributionEvidence): ReadonlyArray<string> => {
  const own = d.before.filter((s) => s.tenant === d.tenant)
  const byId = new Map(own.map((s) => [s.id, s]))
  const considered =
    d.listed === undefined
      ? own.map((s) => s.id).filter((id) => id !== d.fromSession)
      : [...new Set(d.listed)].filter((id) => byId.has(id))
  return considered.filter((id) => {
    const s = byId.get(id)!
    if (s.state === "ended") return false
    if (d.mode === "broadcast") return true
    const pairs = Object.entries(d.filter?.metadata ?? {})
    const concept = d.filter?.concept
    return (
      pairs.every(([k, v]) => s.metadata[k] === v) &&
      (concept === undefined || s.concept.toLowerCase().includes(concept.toLowerCase()))
    )
  })
}

// --- the rules

const rules: Readonly<Record<ScenarioInvariant, (e: ScenarioEvidence) => Array<Found>>> = {
  "shares-respected": (e) =>
    e.budgets.flatMap((b) => {
      const out: Array<Found> = []
      const limits = PROFILE_LIMITS[e.model]
      const expected = limits === undefined ? undefined : expectedAvailable(limits)
      const ledger = (s: SourceEvidence) =>
        `${s.id}: share ${(s.share * 100).toFixed(1)}%, cap ${s.cap}, grant ${s.grant}, used ${s.used}, surplus received ${s.surplusReceived}`
      if (expected !== undefined && b.available > expected)
        out.push({
          step: b.step,
          message: `${where(b)} shares ${b.available} tokens, more than the ${expected} ${e.model} has for input (window less the output reserve)`,
          excerpt: `available ${b.available}`
        })
      const available = Math.min(b.available, expected ?? b.available)
      for (const [what, n] of [
        ["its request", b.total],
        ["its request recounted with tiktoken", b.recount]
      ] as const)
        if (n !== undefined && n > available)
          out.push({
            step: b.step,
            message: `${where(b)}: ${what} takes ${n} tokens, over the ${available} available`,
            excerpt: `${n} > ${available}`
          })
      let granted = 0
      for (const s of b.sources) {
        const used = Math.max(s.used, s.includedTokens)
        granted += s.required ? Math.max(s.grant, used) : s.grant
        if (s.required) continue
        if (used > s.grant)
          out.push({
            step: b.step,
            message: `${where(b)}: source ${s.id} uses ${used} tokens, over its grant of ${s.grant}${s.includedTokens > s.used ? ` (its included units take ${s.includedTokens}, the ledger says ${s.used})` : ""}`,
            excerpt: ledger(s)
          })
        if (s.grant > s.cap + s.surplusReceived)
          out.push({
            step: b.step,
            message: `${where(b)}: source ${s.id} is granted ${s.grant} tokens, more than its cap ${s.cap} and the ${s.surplusReceived} of surplus it received`,
            excerpt: ledger(s)
          })
        if (s.cap > Math.floor(s.share * b.available) + 1)
          out.push({
            step: b.step,
            message: `${where(b)}: source ${s.id} is promised ${s.cap} tokens, more than its ${(s.share * 100).toFixed(1)}% share of ${b.available}`,
            excerpt: ledger(s)
          })
        const promised = b.configuredShares?.[s.id] ?? SEED_SHARES[s.id]
        if (promised !== undefined && s.share > promised + 1e-9)
          out.push({
            step: b.step,
            message: `${where(b)}: source ${s.id} has a share of ${(s.share * 100).toFixed(1)}%, more than the ${(promised * 100).toFixed(1)}% ${b.configuredShares?.[s.id] === undefined ? "the default shares give it" : "the session configures"}`,
            excerpt: ledger(s)
          })
      }
      // Surplus a source received is what the others left: the grants add up to at most what is
      // available, plus what the final exact count restored into the slack it found (units are
      // counted one by one, the request once and whole, which takes less).
      if (granted > b.available + b.restored)
        out.push({
          step: b.step,
          message: `${where(b)}: the grants add up to ${granted} tokens, more than the ${b.available} available${b.restored > 0 ? ` and the ${b.restored} restored into the slack` : ""} (surplus handed out that nobody left)`,
          excerpt: b.sources.map((s) => `${s.id} ${s.grant}`).join(", ")
        })
      return out
    }),

  "no-foreign-blocks": (e) =>
    e.aggregates.flatMap((a) => {
      if (a.blocks === undefined) return []
      const out: Array<Found> = []
      const listed = new Set(a.listed)
      const own = a.sessions.filter((s) => s.tenant === a.tenant)
      const stateOf = new Map(own.map((s) => [s.id, s.state]))
      const allowed = own.filter((s) => listed.has(s.id) && s.state !== "ended")
      const allowedIds = new Set(allowed.map((s) => s.id))
      const why = (id: string) =>
        !stateOf.has(id)
          ? "a session this tenant does not have"
          : stateOf.get(id) === "ended"
            ? "an ended session"
            : "a session the aggregate does not list"
      // 1. By the provenance the answer names.
      for (const b of a.blocks)
        for (const p of b.provenance)
          if (!allowedIds.has(p.session)) {
            out.push({
              step: a.step,
              message: `aggregate block ${b.id} (${b.status}) comes from ${why(p.session)}: ${p.session}`,
              excerpt: `${p.session} · ${p.level ?? "-"} · ${p.source} · ${p.unit}`
            })
            break
          }
      // 2. By the text the agent reads: no input of a foreign session.
      const allowedText = allowed.flatMap((s) => s.inputs)
      const foreign = a.sessions.flatMap((s) => {
        const kind =
          s.tenant !== a.tenant
            ? `session ${s.id} of tenant ${s.tenant}`
            : s.state === "ended"
              ? `ended session ${s.id}`
              : listed.has(s.id)
                ? undefined
                : `session ${s.id}, not listed`
        if (kind === undefined) return []
        return s.inputs
          .filter(
            (input) =>
              input.trim().length >= MIN_MARKER &&
              !a.query.includes(input) &&
              !allowedText.some((t) => t.includes(input))
          )
          .map((input) => ({ input, kind, memoryOk: s.tenant === a.tenant && s.state !== "ended" }))
      })
      for (const section of a.sections ?? []) {
        const hit = foreign.find((f) => section.text.includes(f.input))
        if (hit === undefined) continue
        // A global memory (L3, L4) a listed session's compile drew on is the tenant's: it may hold
        // the words of a session not listed, never those of an ended one or another tenant's.
        const levels = parseHeading(section.heading).map((p) => p.level)
        if (hit.memoryOk && levels.length > 0 && levels.every((l) => l === "L3" || l === "L4")) continue
        out.push({
          step: a.step,
          message: `the aggregated request carries the words of ${hit.kind}`,
          excerpt: `${clip(section.heading, 80)} | ${clip(hit.input, 80)}`
        })
      }
      return out
    }),

  provenance: (e) =>
    e.aggregates.flatMap((a) => {
      if (a.blocks === undefined) return []
      const out: Array<Found> = []
      const listed = new Set(a.listed)
      for (const b of a.blocks) {
        const first = b.provenance[0]
        if (first === undefined) {
          out.push({ step: a.step, message: `aggregate block ${b.id} names no provenance`, excerpt: b.id })
          continue
        }
        const bad = b.provenance.find(
          (p) =>
            p.session === "" ||
            !listed.has(p.session) ||
            (p.level === undefined && p.source === "") ||
            (p.level !== undefined && !/^L[1-4]$/.test(p.level)) ||
            (/^L[34]:/.test(p.unit) && p.level !== p.unit.slice(0, 2))
        )
        if (bad !== undefined)
          out.push({
            step: a.step,
            message: `aggregate block ${b.id} names a provenance without a listed session and a level or source: ${bad.session || "(no session)"} · ${bad.level ?? "(no level)"} · ${bad.source || "(no source)"} · ${bad.unit}`,
            excerpt: b.provenance.map((p) => `${p.session}:${p.unit}`).join(", ")
          })
        else if (b.session !== first.session || b.source !== first.source || b.level !== first.level)
          out.push({
            step: a.step,
            message: `aggregate block ${b.id} says it comes from ${b.session} · ${b.level ?? "-"} · ${b.source}, its first provenance is ${first.session} · ${first.level ?? "-"} · ${first.source}`,
            excerpt: b.id
          })
      }
      const included = a.blocks.filter((b) => b.status === "included").length
      const sections = a.sections ?? []
      if (sections.length !== included)
        out.push({
          step: a.step,
          message: `the aggregated request shows ${sections.length} blocks under a "### From" heading, the answer says ${included} are included`,
          excerpt: sections.map((s) => clip(s.heading, 40)).join(" | ")
        })
      for (const s of sections) {
        const named = parseHeading(s.heading)
        const bad = named.find(
          (p) => !listed.has(p.session) || (p.level === undefined && p.rest.length === 0)
        )
        if (named.length === 0 || bad !== undefined)
          out.push({
            step: a.step,
            message: `a block of the aggregated request does not name a listed session and its level or source`,
            excerpt: clip(s.heading, 160)
          })
      }
      return out
    }),

  promotion: (e) => {
    const out: Array<Found> = []
    const threshold = PROMOTION_THRESHOLD
    const below = (entries: ReadonlyArray<MemoryEntryEvidence>, step: number, whose: string) => {
      for (const entry of entries)
        if (entry.level === "L2" && !(entry.importance > threshold) && !isPinned(entry))
          out.push({
            step,
            message: `${whose} L2 holds ${entry.id} with importance ${entry.importance}, not over ${threshold}, and it is not pinned`,
            excerpt: clip(entry.text)
          })
    }
    for (const t of e.turns) {
      if (t.turn === undefined) continue
      below(t.l2After, t.step, `after the turn, ${t.tenant}/${t.session}'s`)
      const inL2 = hasTurn(t.l2After, t.session, t.turn)
      if (t.importance !== undefined && t.importance > threshold && !inL2)
        out.push({
          step: t.step,
          message: `turn ${t.turn} of ${t.tenant}/${t.session} has importance ${t.importance}, over ${threshold}, and is not in L2 after its turn`,
          excerpt: clip(t.input)
        })
      if (t.important === true && !inL2)
        out.push({
          step: t.step,
          message: `turn ${t.turn} of ${t.tenant}/${t.session} is important (the scenario says so) and is not in L2 after its turn (importance ${t.importance ?? "?"}: ${(t.importanceReasons ?? []).join(", ") || "no rule fired"})`,
          excerpt: clip(t.input)
        })
      if (t.important === false && inL2)
        out.push({
          step: t.step,
          message: `turn ${t.turn} of ${t.tenant}/${t.session} is small talk (the scenario says so) and was promoted to L2 (importance ${t.importance ?? "?"})`,
          excerpt: clip(t.input)
        })
    }
    for (const s of e.finalL2) below(s.entries, e.steps.length - 1, `at the end, ${s.tenant}/${s.session}'s`)
    for (const end of e.ends)
      for (const entry of end.l2) {
        const turn = entry.sources.find((s) => s.session === end.session)?.turn
        if (turn !== undefined && !hasTurn(end.l4, end.session, turn))
          out.push({
            step: end.step,
            message: `${end.tenant}/${end.session} ended and its L2 entry ${entry.id} did not reach L4 (waited ${end.waitedMs} ms for the event bus)`,
            excerpt: clip(entry.text)
          })
      }
    return out
  },

  "l4-survives-restart": (e) => {
    const out: Array<Found> = []
    const key = (x: MemoryEntryEvidence) => JSON.stringify(x)
    for (const r of e.restarts)
      for (const tenant of new Set([...Object.keys(r.before), ...Object.keys(r.after)])) {
        const before = [...(r.before[tenant] ?? [])].sort((a, b) => (a.id < b.id ? -1 : 1))
        const after = [...(r.after[tenant] ?? [])].sort((a, b) => (a.id < b.id ? -1 : 1))
        const lost = before.filter((x) => !after.some((y) => key(y) === key(x)))
        const gained = after.filter((y) => !before.some((x) => key(x) === key(y)))
        if (lost.length > 0 || gained.length > 0)
          out.push({
            step: r.step,
            message: `tenant ${tenant}'s L4 changed across the restart: ${before.length} entries before, ${after.length} after (${lost.length} lost or changed, ${gained.length} new or changed)`,
            excerpt: clip([...lost, ...gained].map((x) => `${x.id}: ${x.text}`).join(" | "), 160)
          })
      }
    for (const t of e.turns) {
      if (t.fromL4 === undefined || t.turn === undefined) continue
      for (const fragment of t.fromL4) {
        const shown = (t.memory ?? []).filter((m) => m.level === "L4" && m.text.includes(fragment))
        const offered = shown.length > 0
        const drawn = shown.some((m) => m.included && m.inRequest)
        if (!drawn)
          out.push({
            step: t.step,
            message: offered
              ? `turn ${t.turn} of ${t.tenant}/${t.session} was offered the L4 memory "${clip(fragment, 60)}" and its request does not show it`
              : `turn ${t.turn} of ${t.tenant}/${t.session}${t.restarts > 0 ? " (after a restart)" : ""} must draw on L4 memory "${clip(fragment, 60)}" and no live L4 entry with it was a source of its compile`,
            excerpt: clip(
              (t.memory ?? []).map((m) => `${m.id}${m.included ? "" : " (left out)"}`).join(", ") ||
                "no memory",
              160
            )
          })
      }
    }
    return out
  },

  distribution: (e) =>
    e.distributions.flatMap((d) => {
      if (d.error !== undefined) return []
      const out: Array<Found> = []
      const targets = new Set(d.retry ? [] : expectedTargets(d))
      const count = (list: ReadonlyArray<TasksOf>, s: TasksOf) =>
        list.find((x) => x.tenant === s.tenant && x.id === s.id)?.withTitle ?? 0
      for (const s of d.after) {
        const added = s.withTitle - count(d.before, s)
        const must = s.tenant === d.tenant && targets.has(s.id) ? 1 : 0
        if (added === must) continue
        const who =
          s.tenant !== d.tenant
            ? `session ${s.id} of tenant ${s.tenant}`
            : s.state === "ended"
              ? `ended session ${s.id}`
              : `session ${s.id} (${s.state})`
        out.push({
          step: d.step,
          message:
            must === 1
              ? `${who} must receive "${clip(d.title, 60)}" once (${d.mode}${d.filter === undefined ? "" : " with its filter"}) and got it ${added} times`
              : `${who} must not receive "${clip(d.title, 60)}"${d.retry ? " (a retry by key)" : ""} and got it ${added} times`,
          excerpt: `${d.mode} ${JSON.stringify(d.filter ?? {})} listed ${d.listed?.join(",") ?? "(all)"}`
        })
      }
      for (const r of d.results ?? []) {
        const reported = r.taskId !== undefined
        if (!d.retry && reported !== targets.has(r.session))
          out.push({
            step: d.step,
            message: `the distribution reports ${r.session} as ${reported ? "given the task" : `skipped (${r.skipped})`}, but it ${targets.has(r.session) ? "is" : "is not"} one the mode and filter select`,
            excerpt: JSON.stringify(r)
          })
      }
      return out
    }),

  "run-transitions": (e) =>
    (e.runs ?? []).flatMap((r): Array<Found> => {
      const out: Array<Found> = []
      const at = `run ${r.runId} of ${r.tenant}/${r.session}`
      const s = r.state
      if (s === undefined) {
        if (r.expect?.error === undefined)
          out.push({ step: r.step, message: `${at} wrote no state`, excerpt: clip(r.goal) })
        return out
      }
      let previous: string | undefined
      for (const [i, t] of s.transitions.entries()) {
        // A resumed run goes from failed back to the phase that failed (or to start).
        const resumed =
          t.from === "failed" &&
          i > 0 &&
          s.transitions[i - 1]!.to === "failed" &&
          (t.to === s.transitions[i - 1]!.from || t.to === "start")
        const legal = t.to === "failed" || resumed || (RUN_TRANSITIONS[t.from] ?? []).includes(t.to)
        if (!legal)
          out.push({
            step: r.step,
            message: `${at}: ${t.from} -> ${t.to} is not a transition of the state diagram`,
            excerpt: `${t.from} -> ${t.to}`
          })
        if (previous !== undefined && t.from !== previous)
          out.push({
            step: r.step,
            message: `${at}: a transition starts at ${t.from} while the run was at ${previous}`,
            excerpt: `${t.from} -> ${t.to}`
          })
        previous = t.to
      }
      if (s.transitions[0]?.from !== "start")
        out.push({
          step: r.step,
          message: `${at} does not start at start`,
          excerpt: s.transitions[0]?.from ?? "(none)"
        })
      const versions = s.transitions.map((t) => t.version)
      if (versions.some((v, i) => i > 0 && v <= versions[i - 1]!) || (versions.at(-1) ?? 0) > s.version)
        out.push({
          step: r.step,
          message: `${at}: the state's versions do not grow with its transitions`,
          excerpt: versions.join(",")
        })
      const done = s.phase === "done"
      if (r.expect?.error === undefined && (!done || !s.isCompleted || s.shouldContinue))
        out.push({
          step: r.step,
          message: `${at} ended at ${s.phase} (completed: ${s.isCompleted}, should continue: ${s.shouldContinue}); expected done`,
          excerpt: clip(s.error?.message ?? r.goal)
        })
      const phases = [s.transitions[0]?.from ?? "start", ...s.transitions.map((t) => t.to)]
      const x = r.expect
      if (x?.phases !== undefined && phases.join(" ") !== x.phases.join(" "))
        out.push({
          step: r.step,
          message: `${at} went ${phases.join(" > ")}; the scenario expects ${x.phases.join(" > ")}`,
          excerpt: clip(phases.join(" "))
        })
      if (x?.complexity !== undefined && s.complexity !== x.complexity)
        out.push({
          step: r.step,
          message: `${at} judged the goal ${s.complexity ?? "(not judged)"}; the scenario expects ${x.complexity}`,
          excerpt: clip(s.complexityReason ?? "")
        })
      if (x?.plans !== undefined && s.planHistory.length !== x.plans)
        out.push({
          step: r.step,
          message: `${at} made ${s.planHistory.length} plans; the scenario expects ${x.plans}`,
          excerpt: String(s.planHistory.length)
        })
      if (x?.reflections !== undefined && s.reflectionCount !== x.reflections)
        out.push({
          step: r.step,
          message: `${at} reflected ${s.reflectionCount} times; the scenario expects ${x.reflections}`,
          excerpt: String(s.reflectionCount)
        })
      for (const id of x?.results ?? [])
        if (s.specialistResults[id] === undefined)
          out.push({
            step: r.step,
            message: `${at} has no result for step ${id}`,
            excerpt: Object.keys(s.specialistResults).join(", ") || "(none)"
          })
      return out
    }),
  "run-limits": (e) =>
    (e.runs ?? []).flatMap((r): Array<Found> => {
      const s = r.state
      if (s === undefined) return []
      const at = `run ${r.runId} of ${r.tenant}/${r.session}`
      const out: Array<Found> = []
      const reflections = r.asked.filter((a) => a === "reflector").length
      if (s.reflectionCount > s.limits.maxReflections || reflections > s.limits.maxReflections)
        out.push({
          step: r.step,
          message: `${at} reflected ${Math.max(reflections, s.reflectionCount)} times; its limit is ${s.limits.maxReflections}`,
          excerpt: String(s.reflectionCount)
        })
      // A finished run asked again answers from history: nobody is asked.
      if (r.events.includes("transition") && reflections !== s.reflectionCount)
        out.push({
          step: r.step,
          message: `${at} asked the reflector ${reflections} times and counts ${s.reflectionCount} reflections`,
          excerpt: r.asked.join(",")
        })
      const started = s.executionHistory.filter((x) => x.event === "started").length
      if (started > s.limits.maxSteps)
        out.push({
          step: r.step,
          message: `${at} ran ${started} specialist steps; its limit is ${s.limits.maxSteps}`,
          excerpt: String(started)
        })
      for (const result of Object.values(s.specialistResults))
        if (result.contextTokens > s.limits.specialistBudget)
          out.push({
            step: r.step,
            message: `${at}: the specialist of ${result.stepId} was sent ${result.contextTokens} tokens; the specialist budget is ${s.limits.specialistBudget}`,
            excerpt: result.stepId
          })
      return out
    }),
  "run-results-once": (e) =>
    (e.runs ?? []).flatMap((r): Array<Found> => {
      const s = r.state
      if (s === undefined) return []
      const at = `run ${r.runId} of ${r.tenant}/${r.session}`
      const out: Array<Found> = []
      const finished = s.executionHistory.filter((x) => x.event === "finished").map((x) => x.stepId)
      for (const id of new Set(finished)) {
        const times = finished.filter((f) => f === id).length
        if (times > 1)
          out.push({
            step: r.step,
            message: `${at}: step ${id} finished ${times} times (a step's result is collected once)`,
            excerpt: id
          })
      }
      const results = Object.keys(s.specialistResults).sort()
      const expected = [...new Set(finished)].sort()
      if (results.join(",") !== expected.join(","))
        out.push({
          step: r.step,
          message: `${at}: results are kept for ${results.join(", ") || "no step"}, steps finished are ${expected.join(", ") || "none"}`,
          excerpt: results.join(",")
        })
      const finishedEvents = r.events.filter((x) => x === "step-finished").length
      if (r.events.includes("transition") && finishedEvents !== finished.length)
        out.push({
          step: r.step,
          message: `${at}: ${finishedEvents} step-finished events for ${finished.length} finished steps`,
          excerpt: r.events.join(",")
        })
      for (const id of results)
        if (s.executionStatus[id] !== "done")
          out.push({
            step: r.step,
            message: `${at}: step ${id} has a result but its status is ${s.executionStatus[id] ?? "(none)"}`,
            excerpt: id
          })
      return out
    }),
  "specialist-isolation": (e) =>
    (e.runs ?? []).flatMap((r): Array<Found> => {
      const s = r.state
      if (s === undefined) return []
      const at = `run ${r.runId} of ${r.tenant}/${r.session}`
      const out: Array<Found> = []
      const steps = new Map(s.planHistory.flatMap((p) => p.steps.map((x) => [x.id, x] as const)))
      // Every specialist that ran in this play was looked at (a replayed run runs none).
      const ran = r.events.filter((x) => x === "step-started").length
      if (r.specialistContexts.length < ran)
        out.push({
          step: r.step,
          message: `${at}: ${ran} specialists started and ${r.specialistContexts.length} of their requests were recorded`,
          excerpt: r.specialistContexts.map((c) => c.stepId).join(", ") || "(none)"
        })
      for (const c of r.specialistContexts) {
        const step = steps.get(c.stepId)
        const text = c.texts.join("\n")
        if (step === undefined) {
          out.push({
            step: r.step,
            message: `${at}: a specialist ran for ${c.stepId}, which no plan has`,
            excerpt: c.stepId
          })
          continue
        }
        if (!text.includes(step.instruction))
          out.push({
            step: r.step,
            message: `${at}: the specialist of ${c.stepId} was not given its step`,
            excerpt: clip(step.instruction)
          })
        for (const d of step.dependsOn) {
          const result = s.specialistResults[d]
          if (result !== undefined && result.text.trim() !== "" && !text.includes(result.text.trim()))
            out.push({
              step: r.step,
              message: `${at}: the specialist of ${c.stepId} was not given the result of ${d}, which it depends on`,
              excerpt: clip(result.text)
            })
        }
        for (const result of Object.values(s.specialistResults)) {
          if (result.stepId === c.stepId || step.dependsOn.includes(result.stepId)) continue
          if (result.text.trim().length >= MIN_MARKER && text.includes(result.text.trim()))
            out.push({
              step: r.step,
              message: `${at}: the specialist of ${c.stepId} was given the result of ${result.stepId}, which it does not depend on`,
              excerpt: clip(result.text)
            })
        }
      }
      return out
    }),
  "run-answer-once": (e) =>
    (e.runs ?? []).flatMap((r): Array<Found> => {
      const s = r.state
      const at = `run ${r.runId} of ${r.tenant}/${r.session}`
      const out: Array<Found> = []
      if (r.goalInputs !== 1 && !(r.expect?.error === "SessionNotActive" && r.goalInputs === 0))
        out.push({
          step: r.step,
          message: `${at}: the goal is ${r.goalInputs} inputs of the session's history (it is one turn's input)`,
          excerpt: clip(r.goal)
        })
      if (s === undefined || s.phase !== "done") return out
      if (r.finals.length !== 1 || r.finals[0] !== s.finalAnswer)
        out.push({
          step: r.step,
          message: `${at}: its turn holds ${r.finals.length} final answers${r.finals.length === 1 ? " other than the run's" : ""} (the final answer is recorded once)`,
          excerpt: clip(r.finals.join(" | "))
        })
      if (r.answerOccurrences !== 1)
        out.push({
          step: r.step,
          message: `${at}: the final answer is in ${r.answerOccurrences} assistant messages of the session`,
          excerpt: clip(s.finalAnswer ?? "")
        })
      if (r.events.filter((x) => x === "done").length !== 1)
        out.push({
          step: r.step,
          message: `${at}: ${r.events.filter((x) => x === "done").length} done events`,
          excerpt: r.events.join(",")
        })
      return out
    }),
  steps: (e) => {
    const out: Array<Found> = []
    if (e.failure !== undefined)
      out.push({
        step: -1,
        message: `the scenario could not be played: ${e.failure}`,
        excerpt: clip(e.failure)
      })
    for (const s of e.steps) {
      const got = s.error?.tag
      if (got === s.expectError) continue
      out.push({
        step: s.step,
        message:
          s.expectError === undefined
            ? `${s.type}${s.session === undefined ? "" : ` ${s.tenant}/${s.session}`} failed: ${s.error!.tag}: ${s.error!.message}`
            : got === undefined
              ? `${s.type}${s.session === undefined ? "" : ` ${s.tenant}/${s.session}`} succeeded; the scenario expects ${s.expectError}`
              : `${s.type}${s.session === undefined ? "" : ` ${s.tenant}/${s.session}`} failed with ${got} (${s.error!.message}); the scenario expects ${s.expectError}`,
        excerpt: s.error === undefined ? s.type : clip(s.error.message)
      })
    }
    for (const t of e.turns)
      if (t.stateBefore !== "active" && (t.turn !== undefined || t.turnsAfter !== t.turnsBefore))
        out.push({
          step: t.step,
          message: `a turn ran in ${t.tenant}/${t.session} while it was ${t.stateBefore} (history went from ${t.turnsBefore} to ${t.turnsAfter} turns)`,
          excerpt: clip(t.input)
        })
    return out
  }
}

/** The violations of one invariant (or all) in a scenario run's evidence. */
export const checkScenario = (
  evidence: ScenarioEvidence,
  invariant?: ScenarioInvariant
): Array<ScenarioViolation> =>
  (invariant === undefined ? SCENARIO_INVARIANTS : [invariant]).flatMap((name) =>
    rules[name](evidence).map((v) => ({
      invariant: name,
      scenario: evidence.scenario,
      model: evidence.model,
      ...v
    }))
  )

/** One line per violation: scenario, step, model, invariant, what, and an excerpt. */
export const formatScenarioViolation = (v: ScenarioViolation): string =>
  `${v.scenario}${v.step < 0 ? "" : ` step ${v.step + 1}`} [${v.model}] ${v.invariant}: ${v.message}${v.excerpt === v.message ? "" : ` | ${v.excerpt}`}`

/** An aggregated OpenAI request recounted with tiktoken in the profile's encoding, when it has one. */
export const recountAggregate = (
  model: string,
  messages: ReadonlyArray<OpenAIMessageLike>
): number | undefined => {
  const encoding: TiktokenEncoding | undefined = PROFILE_LIMITS[model]?.encoding
  return encoding === undefined ? undefined : recountOpenAI(encoding, messages)
}
