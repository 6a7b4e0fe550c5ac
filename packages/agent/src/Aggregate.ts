/**
 * Many sessions into one agent's request (the controller's aggregation, `aggregate_context`):
 * each listed session builds its context for the query, the blocks are merged, deduplicated,
 * ranked by relevance to the query and cut to one budget, and the one request is rendered, every
 * block saying where it comes from.
 *
 * Stages (each a function of its own):
 *
 * 1. sessions (`buildSessions`): every listed session must be one of the caller's (else
 *    `SessionNotFound`, nothing compiled); an ended session is skipped and reported (`ended`), as
 *    is one whose compile fails (`failed`, with the error's sentence). The others are compiled as
 *    their next turn with the query as its input, through the turn engine's preview (their
 *    manifest, history cut, memories, recall, tools on demand, knowledge), for the aggregate's
 *    model, and their blocks read from the compile (`@ctxo/compiler/IncludedBlocks`).
 * 2. merge (`mergeBlocks`): the same content (compared lowercased, whitespace collapsed) is one
 *    block whose provenance lists every session, level and source it came from, in the order
 *    seen (sessions as listed, each in its request's order).
 * 3. rank (`rankBlocks`): BM25 relevance to the query (the compiler's ranker) over the blocks'
 *    content; ties (and blocks with no relevance) by the number of sessions a block came from
 *    (more first), then the order seen.
 * 4. fit (`fitBlocks`): one budget, the model's available input as `@ctxo/budget` computes it
 *    (min(window − output reserve, max input), less the tokenizer's margin); the system prompt
 *    (the data root's `system-prompt.md`) and the query are required, the blocks share what is
 *    left, whole, in rank order (`fitBudget`: a block that does not fit is dropped with the
 *    reason, the assembled request is counted once, exactly, and repaired until it fits). The
 *    request is composed by the composer (system prompt, `aggregate__context`, the query) and
 *    rendered by the compiler's renderers (openai, anthropic, react).
 * 5. promote: the contributing sessions' L2 memories become L3 (`Memory.aggregate`).
 *
 * What a block is, and its provenance `{ session, level?, source, layer, unit }` (`source` is the
 * budget source of the session's report, `layer` where the block stood in its request, `unit` its
 * id in the report):
 *
 * | in the session's compile (unit, layer) | level | source |
 * |---|---|---|
 * | a turn of the conversation (`turn-<n>`, `checkpoint_messages`) | L1 | `recent_history` |
 * | a pinned turn (`turn-<n>`, `checkpoint_messages`) | L2 | `pinned_history` |
 * | an earlier turn recalled by relevance (`recalled-turn-<n>`, `recall__context`) | L1 | `recalled_history` |
 * | a compaction summary (its id, `compression__context`) | L2 | `summaries` |
 * | an L2 memory (`L2:<session>:t<n>`, `important_memory__context`) | L2 | `important_history` |
 * | an L3 or L4 memory (`L3:…`, `L4:…`, `memory__context`) | L3, L4 | `semantic` |
 * | knowledge (`knowledge__context`), the tree (`tree__context`) | — | `knowledge` |
 * | rules (`CODE_LAW.md`, `rules__context`) | — | `rules` |
 * | the todo recap (`todo__context`) | — | `important_history` |
 * | skills, profile blocks, extra sources (their own keys) | — | `skills` (the compiler's share for them) |
 * | `tools__context`, `experience__context` | — | `tools`, `semantic` |
 *
 * A turn is its words (the user's input and the assistant's text, `User: …` / `Assistant: …`), the
 * form in which recall and memory carry a turn, so the same turn shown in one session, recalled in
 * another and promoted to memory is one block. Not blocks: a session's system prompts (private
 * to it), the compiler's note on left-out turns (it names the session's own files), tool
 * definitions (the aggregated request offers no tools), and a memory whose every origin is an
 * ended session (an ended session contributes nothing; counted as `withheld`).
 */

import { fitBudget } from "@ctxo/budget/Budget"
import type { BudgetExceeded, UnknownModel } from "@ctxo/budget/BudgetErrors"
import type { BudgetReport } from "@ctxo/budget/BudgetReport"
import type { Unit } from "@ctxo/budget/Fit"
import { contentHash } from "@ctxo/budget/Fit"
import type { ModelInfo } from "@ctxo/budget/ModelRegistry"
import { ModelRegistry } from "@ctxo/budget/ModelRegistry"
import type { Counter } from "@ctxo/budget/Tokenizer"
import { Tokenizer } from "@ctxo/budget/Tokenizer"
import { type CompileResult, chatMessagesOf } from "@ctxo/compiler/Compile"
import * as CompileCache from "@ctxo/compiler/CompileCache"
import { type Composition, compose } from "@ctxo/compiler/Composer"
import { type IncludedBlock, includedBlocks } from "@ctxo/compiler/IncludedBlocks"
import { rank as rankOnce } from "@ctxo/compiler/Relevance"
import type { Format, RenderedRequest } from "@ctxo/compiler/Render"
import { render } from "@ctxo/compiler/Render"
import type { OfferedTool, Ranker } from "@ctxo/compiler/ToolSelection"
import type { MemoryEntry, MemoryLevel, SessionRecord, SessionState } from "@ctxo/store/Records"
import { Store } from "@ctxo/store/Store"
import type { StoreError } from "@ctxo/store/StoreErrors"
import { Effect, Either, Option } from "effect"
import { InvalidControllerInput } from "./Controller.ts"
import * as Memory from "./Memory.ts"
import { TurnEngine } from "./TurnEngine.ts"

/** A memory level (L1 a session's own turns, L2 its important memory, L3 agent-level, L4 global). */
export type Level = MemoryLevel

/** The data root's system prompt: the aggregated request's, as a session's compile reads it. */
export const SYSTEM_PROMPT_FILE = "system-prompt.md"
/** The context key the kept blocks go in (after the system prompt, before the query). */
export const AGGREGATE_KEY = "aggregate__context"
/** The budget source the blocks share (the ledger's `source` of every block). */
export const BLOCKS_SOURCE = "sessions"
/** Sessions one aggregate may list. */
export const MAX_SESSIONS = 100

export interface AggregateOptions {
  /** The sessions, in the order their blocks are preferred on ties (duplicates count once). */
  readonly sessions: ReadonlyArray<string>
  readonly query: string
  /** The model of the agent the request is for (default `defaultModel`); every session compiles for it. */
  readonly model?: string
  readonly defaultModel: string
  /** The request's format (default openai). */
  readonly format?: Format
  /** The tools a turn would offer: each session's compile loads them on demand as its turn would. */
  readonly tools?: ReadonlyArray<OfferedTool>
}

/** One place a block came from: a session's compile, the memory level and the budget source. */
export interface Provenance {
  readonly session: string
  readonly level?: Level
  readonly source: string
  /** The unit in that session's compile report (`turn-3`, `L3:9f…`, `notes.md#Intro`). */
  readonly unit: string
  /** The layer it stood in there: a `__context` key, or `checkpoint_messages` for a turn of the conversation. */
  readonly layer: string
  readonly ref?: string
}

/** A block of the merged context before ranking: its content and everywhere it came from. */
export interface MergedBlock {
  /** `b-` and the first 12 hex digits of the SHA-256 of its normalized content. */
  readonly id: string
  readonly content: string
  readonly provenance: ReadonlyArray<Provenance>
  /** Position in the order seen (sessions as listed, each in its request's order). */
  readonly seen: number
}

export interface RankedBlock extends MergedBlock {
  /** BM25 relevance to the query (0: none). */
  readonly score: number
}

/** A block in the answer: where it came from, its tokens in the aggregated request, and its fate. */
export interface AggregateBlock {
  readonly id: string
  /** The first session it came from (the group it stands in). */
  readonly session: string
  /** Every session it came from, in the order listed. */
  readonly sessions: ReadonlyArray<string>
  /** The level of its first provenance. */
  readonly level?: Level
  /** The budget source of its first provenance. */
  readonly source: string
  readonly provenance: ReadonlyArray<Provenance>
  readonly score: number
  /** Tokens of its section (provenance heading and content) in the aggregated request. */
  readonly tokens: number
  readonly status: "included" | "dropped"
  readonly reason?: string
  readonly hash: string
}

export type SkipReason = "ended" | "failed"

export interface Skipped {
  readonly session: string
  readonly reason: SkipReason
  readonly message: string
}

/** What one contributing session's build gave. */
export interface SessionBuild {
  readonly session: string
  readonly state: SessionState
  /** Blocks its compile put in its request (before the merge). */
  readonly blocks: number
  /** Tokens of its compiled request. */
  readonly tokens: number
  /** Memories left out because every session they come from is ended. */
  readonly withheld: number
}

/** The aggregated request, typed by its format: only system and user text, no tools. */
export type AggregateRequest =
  | {
      readonly format: "openai"
      readonly request: {
        readonly messages: ReadonlyArray<{ readonly role: "system" | "user"; readonly content: string }>
      }
    }
  | {
      readonly format: "anthropic"
      readonly request: {
        readonly system: string
        readonly messages: ReadonlyArray<{
          readonly role: "user"
          readonly content: ReadonlyArray<{ readonly type: "text"; readonly text: string }>
        }>
      }
    }
  | { readonly format: "react"; readonly request: { readonly prompt: string } }

export type Aggregated = AggregateRequest & {
  readonly model: string
  readonly query: string
  /** The budget ledger of the aggregated request (sources `system_prompt`, `user_input`, `sessions`). */
  readonly report: BudgetReport
  /** Every merged block, best ranked first. */
  readonly blocks: ReadonlyArray<AggregateBlock>
  readonly sessions: ReadonlyArray<SessionBuild>
  readonly skipped: ReadonlyArray<Skipped>
  /** L3 entries the contributing sessions' L2 made or refreshed. */
  readonly promoted: number
  readonly warnings: ReadonlyArray<string>
}

export type AggregateError = InvalidControllerInput | StoreError | UnknownModel | BudgetExceeded

// --- 0. the request

/** The sessions (deduplicated, in order) and the query, or what is wrong with them (one sentence naming the field). */
export const validate = (
  options: Pick<AggregateOptions, "sessions" | "query">
): Either.Either<
  { readonly sessions: ReadonlyArray<string>; readonly query: string },
  InvalidControllerInput
> => {
  const sessions = [...new Set(options.sessions)]
  if (sessions.length === 0)
    return Either.left(
      new InvalidControllerInput({ field: "sessions", reason: "list at least one session to aggregate" })
    )
  if (sessions.length > MAX_SESSIONS)
    return Either.left(
      new InvalidControllerInput({
        field: "sessions",
        reason: `at most ${MAX_SESSIONS} sessions can be aggregated at once (${sessions.length} listed)`
      })
    )
  if (options.query.trim() === "")
    return Either.left(
      new InvalidControllerInput({
        field: "query",
        reason: "the question the aggregated context is for cannot be empty"
      })
    )
  return Either.right({ sessions, query: options.query })
}

// --- 1. the sessions' builds

/** The level of a block of a session's compile (the table in the module's header). */
export const levelOf = (block: IncludedBlock): Level | undefined => {
  if (block.kind === "turn") return block.source === "pinned_history" ? "L2" : "L1"
  switch (block.layer) {
    case "recall__context":
      return "L1"
    case "compression__context":
    case "important_memory__context":
      return "L2"
    case "memory__context":
      return block.id.startsWith("L4:") ? "L4" : "L3"
    default:
      return undefined
  }
}

/** The id of the compiler's note on left-out turns (in `compression__context`). */
const HISTORY_NOTE = "history-note"

/** Whether a block of a session's compile is offered to the aggregate (the module's header says why not). */
export const offered = (block: IncludedBlock): boolean =>
  block.source !== "system_prompt" &&
  !(block.layer === "compression__context" && block.id === HISTORY_NOTE) &&
  block.content.trim() !== ""

export interface SessionBlock {
  readonly content: string
  readonly provenance: Provenance
}

/** A session's offered blocks with their provenance. */
export const blocksOf = (
  session: string,
  blocks: ReadonlyArray<IncludedBlock>
): ReadonlyArray<SessionBlock> =>
  blocks.filter(offered).map((b) => {
    const level = levelOf(b)
    return {
      content: b.content,
      provenance: {
        session,
        ...(level === undefined ? {} : { level }),
        source: b.source,
        unit: b.id,
        layer: b.layer,
        ...(b.ref === undefined ? {} : { ref: b.ref })
      }
    }
  })

type Outcome =
  | { readonly record: SessionRecord; readonly compiled: CompileResult }
  | { readonly record: SessionRecord; readonly skipped: Skipped }

interface Built {
  readonly builds: ReadonlyArray<SessionBuild>
  readonly blocks: ReadonlyArray<ReadonlyArray<SessionBlock>>
  readonly skipped: ReadonlyArray<Skipped>
}

const buildSessions = (
  sessions: ReadonlyArray<string>,
  query: string,
  model: string,
  options: AggregateOptions
): Effect.Effect<Built, StoreError, TurnEngine | Store> =>
  Effect.gen(function* () {
    const store = yield* Store
    const engine = yield* TurnEngine
    // Every session must be the caller's before anything is compiled (another tenant's is unknown).
    const records: ReadonlyArray<SessionRecord> = yield* Effect.forEach(sessions, (id) =>
      store.getSession(id)
    )
    const ended = new Set((yield* store.listSessions).filter((r) => r.state === "ended").map((r) => r.id))
    const global = yield* store.readGlobalMemory
    const originsOf = new Map(global.map((e) => [e.id, e.sources]))
    const results = yield* Effect.forEach(
      records,
      (record): Effect.Effect<Outcome> =>
        record.state === "ended"
          ? Effect.succeed({
              record,
              skipped: {
                session: record.id,
                reason: "ended" as const,
                message: `Session ${record.id} is ended: an ended session contributes nothing`
              }
            })
          : engine
              .preview({
                sessionId: record.id,
                input: query,
                model,
                defaultModel: options.defaultModel,
                ...(options.tools === undefined ? {} : { tools: options.tools })
              })
              .pipe(
                Effect.map((compiled) => ({ record, compiled })),
                Effect.catchAll((e) =>
                  Effect.succeed({
                    record,
                    skipped: {
                      session: record.id,
                      reason: "failed" as const,
                      message: `Session ${record.id} could not be compiled: ${e.message}`
                    }
                  })
                )
              ),
      { concurrency: 4 }
    )
    const builds: Array<SessionBuild> = []
    const blocks: Array<ReadonlyArray<SessionBlock>> = []
    const skipped: Array<Skipped> = []
    for (const r of results) {
      if ("skipped" in r) {
        skipped.push(r.skipped)
        continue
      }
      const all = blocksOf(r.record.id, includedBlocks(r.compiled))
      const kept = all.filter((b) => !fromEndedOnly(b.provenance, originsOf, ended))
      builds.push({
        session: r.record.id,
        state: r.record.state,
        blocks: kept.length,
        tokens: r.compiled.report.total ?? 0,
        withheld: all.length - kept.length
      })
      blocks.push(kept)
    }
    return { builds, blocks, skipped }
  })

/** An L3 or L4 memory whose every origin is an ended session. */
const fromEndedOnly = (
  provenance: Provenance,
  originsOf: ReadonlyMap<string, MemoryEntry["sources"]>,
  ended: ReadonlySet<string>
) => {
  if (provenance.level !== "L3" && provenance.level !== "L4") return false
  const origins = originsOf.get(provenance.unit) ?? []
  return origins.length > 0 && origins.every((o) => ended.has(o.session))
}

// --- 2. merge

/** Content as compared for deduplication: lowercased, whitespace collapsed, trimmed. */
export const normalize = (text: string): string => text.toLowerCase().replace(/\s+/g, " ").trim()

/** The sessions' blocks (in the order listed) as one list: the same content once, with every provenance. */
export const mergeBlocks = (
  sessions: ReadonlyArray<ReadonlyArray<SessionBlock>>
): ReadonlyArray<MergedBlock> => {
  const byContent = new Map<string, { content: string; provenance: Array<Provenance>; seen: number }>()
  let seen = 0
  for (const blocks of sessions)
    for (const b of blocks) {
      const key = normalize(b.content)
      const found = byContent.get(key)
      if (found === undefined)
        byContent.set(key, { content: b.content, provenance: [b.provenance], seen: seen++ })
      else found.provenance.push(b.provenance)
    }
  return [...byContent].map(([key, b]) => ({ id: `b-${contentHash(key).slice(0, 12)}`, ...b }))
}

// --- 3. rank

const sessionsOf = (provenance: ReadonlyArray<Provenance>) => [...new Set(provenance.map((p) => p.session))]

/**
 * The blocks best first: BM25 relevance to the query (the compiler's ranker); equal scores (and no
 * relevance at all) by the number of sessions a block came from, more first, then the order seen.
 */
export const rankBlocks = (
  blocks: ReadonlyArray<MergedBlock>,
  query: string,
  rank: Ranker
): ReadonlyArray<RankedBlock> => {
  const scores = new Map(
    rank(
      query,
      blocks.map((b) => ({ id: b.id, text: b.content }))
    ).map((hit) => [hit.id, hit.score])
  )
  return blocks
    .map((b) => ({ ...b, score: scores.get(b.id) ?? 0 }))
    .sort(
      (a, b) =>
        b.score - a.score ||
        sessionsOf(b.provenance).length - sessionsOf(a.provenance).length ||
        a.seen - b.seen
    )
}

// --- 4. fit and render

/** How a provenance reads in a block's heading: `session · level · source · unit`. */
const provenanceText = (p: Provenance) =>
  [p.session, p.level, p.source, p.ref ?? p.unit].filter((x) => x !== undefined).join(" · ")

/** At most this many provenances are named in a block's heading (the answer lists them all). */
const HEADING_PROVENANCES = 4

/** A block as it stands in the aggregated context: a heading naming where it comes from, then its content. */
export const sectionOf = (block: MergedBlock): string => {
  const named = block.provenance.slice(0, HEADING_PROVENANCES).map(provenanceText)
  const more = block.provenance.length - named.length
  return `### From ${named.join("; ")}${more > 0 ? `; and ${more} more` : ""}\n${block.content}`
}

type BlockUnit = Unit & { readonly block: RankedBlock }
type RequestUnit = BlockUnit | (Unit & { readonly block?: undefined })

/** The aggregated context: the kept blocks grouped by their first session (in the order listed), best first in each. */
export const contextText = (sessions: ReadonlyArray<string>, blocks: ReadonlyArray<RankedBlock>): string => {
  if (blocks.length === 0) return ""
  const groups = new Map<string, Array<RankedBlock>>()
  for (const s of sessions) groups.set(s, [])
  for (const b of blocks) groups.get(b.provenance[0]!.session)?.push(b)
  const named = [...groups].filter(([, list]) => list.length > 0)
  // Every session a kept block came from (a block stands under the first of its sessions only).
  const from = sessions.filter((s) => blocks.some((b) => b.provenance.some((p) => p.session === s)))
  return [
    `Context from ${from.length === 1 ? "session" : "sessions"} ${from.join(", ")} for the question below; each block names the sessions, memory levels and sources it comes from.`,
    ...named.map(([session, list]) => [`## Session ${session}`, ...list.map(sectionOf)].join("\n\n"))
  ].join("\n\n")
}

export const composition = (
  systemPrompt: string,
  context: string,
  query: string
): Either.Either<Composition, unknown> =>
  compose({
    policy: "layered",
    systemPrompt,
    contexts: context === "" ? {} : { [AGGREGATE_KEY]: context },
    checkpointMessages: [],
    query
  })

/** The rendered request narrowed to what an aggregated request holds (system and user text). */
export const narrow = (rendered: RenderedRequest): AggregateRequest => {
  switch (rendered.format) {
    case "openai":
      return {
        format: "openai",
        request: {
          messages: rendered.request.messages.flatMap((m) =>
            m.role === "system" || m.role === "user" ? [{ role: m.role, content: m.content }] : []
          )
        }
      }
    case "anthropic":
      return {
        format: "anthropic",
        request: {
          system: rendered.request.system,
          messages: rendered.request.messages.flatMap((m) =>
            m.role === "user"
              ? [
                  {
                    role: "user" as const,
                    content: m.content.flatMap((c) =>
                      c.type === "text" ? [{ type: "text" as const, text: c.text }] : []
                    )
                  }
                ]
              : []
          )
        }
      }
    case "react":
      return { format: "react", request: { prompt: rendered.request.prompt } }
  }
}

export interface Fitted {
  readonly rendered: AggregateRequest
  readonly report: BudgetReport
  readonly blocks: ReadonlyArray<AggregateBlock>
}

/**
 * The blocks cut to the model's budget beside the required system prompt and query, whole, best
 * ranked first, the assembled request counted exactly (never over `available`); the ledger says
 * why each block left out is out.
 */
export const fitBlocks = (options: {
  readonly model: ModelInfo & { readonly requested?: string; readonly fallback?: string }
  readonly counter: Counter
  readonly systemPrompt: string
  readonly query: string
  readonly sessions: ReadonlyArray<string>
  readonly blocks: ReadonlyArray<RankedBlock>
  readonly format: Format
}): Either.Either<Fitted, BudgetExceeded> => {
  const { counter, systemPrompt, query, sessions, format } = options
  const base = counter.countMessages([])
  const framed = (role: "system" | "user", text: string) =>
    counter.countMessages([{ role, content: text }]) - base
  const system: ReadonlyArray<RequestUnit> =
    systemPrompt.trim() === ""
      ? []
      : [
          {
            id: "system_prompt",
            source: "system_prompt",
            text: systemPrompt,
            tokens: framed("system", systemPrompt),
            required: true
          }
        ]
  const input: RequestUnit = {
    id: "query",
    source: "user_input",
    text: query,
    tokens: framed("user", query),
    required: true
  }
  const units: ReadonlyArray<BlockUnit> = options.blocks.map((block) => {
    const text = sectionOf(block)
    return {
      id: block.id,
      source: BLOCKS_SOURCE,
      text,
      hash: contentHash(text),
      ref: block.provenance
        .map((p) => `${p.session}:${p.unit}`)
        .join(", ")
        .slice(0, 200),
      tokens: counter.count(`${text}\n\n`),
      block
    }
  })
  const renderWith = (included: ReadonlyArray<RequestUnit>): RenderedRequest | undefined => {
    const kept = included.flatMap((u) => (u.block === undefined ? [] : [u.block]))
    return Either.match(composition(systemPrompt, contextText(sessions, kept), query), {
      onLeft: () => undefined,
      onRight: (c) => render(c, format)
    })
  }
  const countOf = (rendered: RenderedRequest | undefined) =>
    rendered === undefined ? Number.POSITIVE_INFINITY : counter.countMessages(chatMessagesOf(rendered))
  const fitted = fitBudget<RequestUnit>({
    model: options.model,
    counter,
    sources: [
      { id: "system_prompt", required: true, share: 0, units: system },
      { id: "user_input", required: true, share: 0, units: [input] },
      { id: BLOCKS_SOURCE, share: 1, units }
    ],
    countTotal: (included) => countOf(renderWith(included))
  })
  if (Either.isLeft(fitted)) return Either.left(fitted.left)
  const { included, report } = fitted.right
  const rendered = renderWith(included)!
  const rows = new Map(report.units.map((r) => [r.id, r]))
  const blocks = units.map((u): AggregateBlock => {
    const row = rows.get(u.id)
    const first = u.block.provenance[0]!
    return {
      id: u.id,
      session: first.session,
      sessions: sessions.filter((s) => u.block.provenance.some((p) => p.session === s)),
      ...(first.level === undefined ? {} : { level: first.level }),
      source: first.source,
      provenance: u.block.provenance,
      score: u.block.score,
      tokens: u.tokens,
      status: row?.status === "included" ? "included" : "dropped",
      ...(row?.reason === undefined ? {} : { reason: row.reason }),
      hash: u.hash!
    }
  })
  return Either.right({ rendered: narrow(rendered), report, blocks })
}

// --- the whole

/**
 * Aggregates the listed sessions' contexts for `query` into one request for one agent. Requires the
 * caller's store (its tenant's), the turn engine, the model registry and the tokenizer; uses the
 * context's `Memory` (else one over the store with the default settings) and `CompileCache` ranker
 * when there are.
 */
export const aggregate = Effect.fn("Aggregate.aggregate")(function* (options: AggregateOptions) {
  const { sessions, query } = yield* Either.match(validate(options), {
    onLeft: Effect.fail,
    onRight: Effect.succeed
  })
  const registry = yield* ModelRegistry
  const tokenizer = yield* Tokenizer
  const store = yield* Store
  const modelName = options.model ?? options.defaultModel
  const model = yield* registry.resolve(modelName)
  const counter = yield* tokenizer.counter(model)

  const built = yield* buildSessions(sessions, query, modelName, options)
  const cache = yield* Effect.serviceOption(CompileCache.CompileCache)
  const rank: Ranker = Option.match(cache, { onNone: () => rankOnce, onSome: (c) => c.rank })
  const ranked = rankBlocks(mergeBlocks(built.blocks), query, rank)
  const systemPrompt = ((yield* store.read("global", "", SYSTEM_PROMPT_FILE)) ?? "").trim()
  const fitted = yield* Either.match(
    fitBlocks({
      model,
      counter,
      systemPrompt,
      query,
      sessions,
      blocks: ranked,
      format: options.format ?? "openai"
    }),
    { onLeft: Effect.fail, onRight: Effect.succeed }
  )

  // 5. promote: the contributing sessions' L2 becomes L3.
  const warnings: Array<string> = []
  if (model.fallback !== undefined) warnings.push(model.fallback)
  const memory = yield* Option.match(yield* Effect.serviceOption(Memory.Memory), {
    onNone: () => Memory.make(),
    onSome: Effect.succeed
  })
  const promoted = yield* memory.aggregate(built.builds.map((b) => b.session)).pipe(
    Effect.map((made) => made.length),
    Effect.catchAll((e) =>
      Effect.sync(() => {
        warnings.push(`memory: the sessions' L2 was not aggregated into L3: ${e.message}`)
        return 0
      })
    )
  )
  const result: Aggregated = {
    ...fitted.rendered,
    model: model.id,
    query,
    report: fitted.report,
    blocks: fitted.blocks,
    sessions: built.builds,
    skipped: built.skipped,
    promoted,
    warnings
  }
  return result
})
