/**
 * Collectors behind one interface (seed 003 ContextSource, seed 001 ContextCollector). The seed's
 * `collect(query, token_budget, token_counter) -> blocks` is here `collect(context)`: the context
 * carries the query (`query`), the source's guaranteed budget (`budgetOf`), the counter
 * (`counter`) and a ranker (`rank`), with what the source may read; it returns units of one
 * `__context` key, most wanted first, each with its provenance (`ref`), its priority and, where
 * relevance chose it, its place in document order (`position`). Their tokens are counted by the
 * compile with the provider's framing, so what the budget fits is what is sent. The formatting is in
 * `Sources` (pure); a key that does not end in `__context` is refused.
 */
import type { BlockIdSidecar } from "@ctxo/blocks/BlockIds"
import type { Counter } from "@ctxo/budget/Tokenizer"
import type { HistoryDocument, Message, Summary } from "@ctxo/history/Message"
import { turnsOf } from "@ctxo/history/Turns"
import { MAP_FILE } from "@ctxo/store/Paths"
import { Context, Effect, Either } from "effect"
import { InvalidContextKey, UnresolvedReference } from "./CompilerErrors.ts"
import type { Manifest } from "./Manifest.ts"
import type { MetaContext } from "./MetaContext.ts"
import { metaSource } from "./MetaContext.ts"
import type { ContextUnit } from "./Sources.ts"
import { findRulesFile, globMatcher, isGlob, todoRecap } from "./Sources.ts"
import type { ContextInfo } from "./ThinkingMap.ts"
import { contextInfo, formatContext, MAP_SHARE, parseMap } from "./ThinkingMap.ts"
import type { Ranker } from "./ToolSelection.ts"

/** What a source is asked for (seed 003): the query, its budget, and the counter to count with. */
export interface CollectRequest {
  /** The input being answered (the running turn's input when a step of a turn is compiled). */
  readonly query: string
  readonly counter: Counter
  /** The tokens a source is guaranteed: its share of the available budget (it may get more lent). */
  readonly budgetOf: (source: string) => number
  /** Ranks documents for the query (positive scores, best first). */
  readonly rank: Ranker
}

/**
 * A data root's persistent knowledge index (`@ctxo/agent/KnowledgeIndex`): given a session's
 * knowledge files with their units and the query, the unit ids most relevant first. It is kept in
 * step with the files (only what changed is indexed again) and saved, so a restart indexes nothing.
 * Without one, knowledge is ranked by the compile's own ranker.
 */
export class KnowledgeIndex extends Context.Tag("@ctxo/compiler/KnowledgeIndex")<
  KnowledgeIndex,
  {
    readonly rank: (request: {
      readonly sessionId: string
      readonly query: string
      readonly files: ReadonlyArray<{
        readonly path: string
        readonly content: string
        readonly units: ReadonlyArray<ContextUnit>
      }>
    }) => Effect.Effect<ReadonlyArray<string>>
  }
>() {}

/** A memory a compile may draw on (`@ctxo/agent/Memory`): L2 of the session, L3 and L4. */
export interface MemoryItem {
  readonly id: string
  readonly level: "L2" | "L3" | "L4"
  readonly text: string
  readonly importance: number
  /** Which sessions (and turns) it comes from. */
  readonly sources: ReadonlyArray<{ readonly session: string; readonly turn?: number }>
}

export interface CollectContext extends CollectRequest {
  readonly sessionId: string
  /** The data root's knowledge index, when the caller has one. */
  readonly knowledgeIndex?: KnowledgeIndex["Type"]
  /** Memories the caller holds for this session (none: no memory source). */
  readonly memory: ReadonlyArray<MemoryItem>
  /** Whether the turn of this session is still in the history's view (a memory of one is not needed). */
  readonly isLiveTurn: (turn: number) => boolean
  readonly manifest: Manifest
  /** The session's whole history (the conversation about a thinking-map node is its turns that name it). */
  readonly history: HistoryDocument
  /** A node's context handed by the caller (a specialist's step): the tree source shows it instead of `manifest.tree`. */
  readonly nodeContext?: ContextInfo
  /** A run's meta context handed by the caller (the planner's, the reflector's). */
  readonly meta?: MetaContext
  /** The session's files, relative, sorted. */
  readonly sessionFiles: ReadonlyArray<string>
  /** Summaries the history view shows (compression__context). */
  readonly summaries: ReadonlyArray<Summary>
  /** Reads a file that must exist (global: the data root; session: the session directory). */
  readonly read: (scope: "global" | "session", path: string) => Effect.Effect<string, UnresolvedReference>
  /** Reads files that must exist, in order (the unchanged at once, the rest concurrently). */
  readonly readMany: (
    scope: "global" | "session",
    paths: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<string>, UnresolvedReference>
  /** The block-id sidecar of a file (`<file>.blocks.json`), if it has one: short ids resolve with it. */
  readonly readSidecar: (
    scope: "global" | "session",
    file: string
  ) => Effect.Effect<BlockIdSidecar | undefined, UnresolvedReference>
  /**
   * `Sources.knowledgeUnits` of a session file, through the compile's cache: the units are the
   * same objects while the file's text (and sidecar) is, so the budget's per-unit caches hit.
   */
  readonly knowledgeUnits: (
    path: string,
    content: string,
    block: string | undefined,
    sidecar: BlockIdSidecar | undefined
  ) => Either.Either<ReadonlyArray<ContextUnit>, UnresolvedReference>
  /** `Sources.selectProfileBlocks` of a global file, through the compile's cache likewise. */
  readonly profileBlocks: (
    file: string,
    content: string,
    ids: ReadonlyArray<string>,
    sidecar: BlockIdSidecar | undefined
  ) => Either.Either<ReadonlyArray<ContextUnit>, UnresolvedReference>
  readonly warn: (message: string) => void
}

export interface ContextSource {
  readonly id: string
  readonly collect: (
    context: CollectContext
  ) => Effect.Effect<ReadonlyArray<ContextUnit>, UnresolvedReference>
}

const fromEither = <A, E>(either: Either.Either<A, E>) =>
  Either.match(either, { onLeft: Effect.fail, onRight: Effect.succeed })

/** Session-level system prompt files (`systemPrompt[]` of type `session`). */
export const sessionPromptSource: ContextSource = {
  id: "session-prompt",
  collect: Effect.fnUntraced(function* (c: CollectContext) {
    const texts: Array<string> = []
    for (const s of c.manifest.systemPrompt)
      if (s.type === "session") texts.push((yield* c.read("session", s.file)).trim())
    return texts.length === 0
      ? []
      : [{ key: "session_prompt__context", id: "session-prompt", text: texts.join("\n\n") }]
  })
}

/** `CODE_LAW.md` (any case) at the session root, as rules (seed 002 C5). */
export const rulesSource: ContextSource = {
  id: "rules",
  collect: Effect.fnUntraced(function* (c: CollectContext) {
    const file = findRulesFile(c.sessionFiles)
    if (file === undefined) return []
    const text = (yield* c.read("session", file)).trim()
    return text === "" ? [] : [{ key: "rules__context", id: file, ref: file, text }]
  })
}

/** The todo recap: the manifest's todo file, else `milestones.md` when the session has one. */
export const todoSource: ContextSource = {
  id: "todo",
  collect: Effect.fnUntraced(function* (c: CollectContext) {
    const file = c.manifest.todo ?? (c.sessionFiles.includes("milestones.md") ? "milestones.md" : undefined)
    if (file === undefined) return []
    const recap = todoRecap(yield* c.read("session", file), file)
    return recap === undefined ? [] : [{ key: "todo__context", id: file, ref: file, text: recap }]
  })
}

/**
 * A thinking-map node's context (`tree__context`) in its seven sections (`ThinkingMap.formatContext`),
 * cut to the knowledge share: the node context the caller handed (a specialist's step), else the
 * manifest's `tree` node of the session's map file, with the conversation of this session's history.
 */
/** The node the running (unfinished) turn's input names, if any. */
const runningNode = (history: HistoryDocument): string | undefined => {
  const last = history.messages.at(-1)
  if (last === undefined) return undefined
  // The last message's turn, from the history's grouping into turns (kept as it grows: a check of
  // the kept grouping's messages by identity instead of a filtered copy of every message).
  const turns = turnsOf(history.messages)
  let messages: ReadonlyArray<Message> = []
  for (let i = turns.length - 1; i >= 0; i--)
    if (turns[i]!.turn === last.meta.turn) {
      messages = turns[i]!.messages
      break
    }
  if (messages.some((m) => m.meta.kind === "final")) return undefined
  return messages.find((m) => m.meta.kind === "input")?.meta.node
}

export const treeSource: ContextSource = {
  id: "tree",
  collect: Effect.fnUntraced(function* (c: CollectContext) {
    const format = (info: ContextInfo) =>
      formatContext(info, { budget: c.budgetOf(MAP_SHARE), count: (text) => c.counter.count(text) }).text
    if (c.nodeContext !== undefined) {
      const id = c.nodeContext.node.id
      return [{ key: "tree__context", id: `node:${id}`, ref: `node ${id}`, text: format(c.nodeContext) }]
    }
    // The manifest's node; else the node the running turn's input names (a chat sent with `node`)
    // when the session has a map: a turn about a node sees that node's context.
    const named = c.manifest.tree === undefined ? runningNode(c.history) : undefined
    const tree =
      c.manifest.tree ??
      (named !== undefined && c.sessionFiles.includes(MAP_FILE) ? { file: MAP_FILE, node: named } : undefined)
    if (tree === undefined) return []
    const ref = `${tree.file}#${tree.node}`
    const invalid = (e: { readonly message: string }) =>
      new UnresolvedReference({ ref, kind: "invalid", reason: e.message })
    const map = yield* fromEither(
      Either.mapLeft(parseMap(yield* c.read("session", tree.file), tree.file), invalid)
    )
    const info = contextInfo({ map, nodeId: tree.node, history: c.history, file: tree.file })
    if (Either.isLeft(info) && c.manifest.tree === undefined) {
      // A chat naming a node the map does not have still runs, without a node context.
      c.warn(`node ${tree.node} of the turn's input: ${info.left.message}; no tree__context`)
      return []
    }
    return [
      {
        key: "tree__context",
        id: ref,
        ref: tree.file,
        text: format(yield* fromEither(Either.mapLeft(info, invalid)))
      }
    ]
  })
}

/** Selected blocks of the profile (`profileBlocks`: heading paths or short ids like `^b3`). */
export const profileSource: ContextSource = {
  id: "profile",
  collect: (c) => (c.manifest.profileBlocks.length === 0 ? Effect.succeed([]) : profileUnits(c))
}
const profileUnits = Effect.fnUntraced(function* (c: CollectContext) {
  const profile = yield* c.read("global", c.manifest.profile)
  const sidecar = yield* c.readSidecar("global", c.manifest.profile)
  return yield* fromEither(c.profileBlocks(c.manifest.profile, profile, c.manifest.profileBlocks, sidecar))
})

/**
 * Units most relevant to the query first (by score), then the rest in their given order: a budget
 * that cannot keep them all keeps the relevant ones (seed 003 "Knowledge: 按相关性").
 */
const byRelevance = (c: CollectContext, units: ReadonlyArray<ContextUnit>): ReadonlyArray<ContextUnit> => {
  if (units.length < 2 || c.query.trim() === "") return units
  const ranked = c.rank(
    c.query,
    units.map((u) => ({ id: u.id, text: u.text }))
  )
  return inRankOrder(
    units,
    ranked.map((r) => r.id)
  )
}

/** Units whose ids are ranked first (in that order), the rest after in their given order; each with its position. */
const inRankOrder = (
  units: ReadonlyArray<ContextUnit>,
  ranked: ReadonlyArray<string>
): ReadonlyArray<ContextUnit> => {
  if (ranked.length === 0) return units
  const position = new Map(ranked.map((id, i) => [id, i]))
  return units
    .map((u, i) => ({ u: { ...u, position: i }, p: position.get(u.id) ?? ranked.length + i }))
    .sort((a, b) => a.p - b.p)
    .map((x) => x.u)
}

/**
 * Knowledge: files (Markdown split by top-level block), blocks, and globs of session files; with
 * an input, the most relevant first.
 */
export const knowledgeSource: ContextSource = {
  id: "knowledge",
  collect: Effect.fnUntraced(function* (c: CollectContext) {
    const units: Array<ContextUnit> = []
    const files: Array<{ path: string; content: string; units: ReadonlyArray<ContextUnit> }> = []
    for (const entry of c.manifest.knowledge) {
      const paths = isGlob(entry.path) ? c.sessionFiles.filter(globMatcher(entry.path)) : [entry.path]
      if (paths.length === 0) c.warn(`knowledge ${entry.path}: no file matches`)
      const texts = yield* c.readMany("session", paths)
      for (const [i, path] of paths.entries()) {
        // Only a named block needs the sidecar (a short id, or an old name of a renamed heading).
        const sidecar = entry.block === undefined ? undefined : yield* c.readSidecar("session", path)
        const fileUnits = yield* fromEither(c.knowledgeUnits(path, texts[i]!, entry.block, sidecar))
        units.push(...fileUnits)
        // The index holds whole files; a file named for one block is ranked like the rest.
        if (entry.block === undefined) files.push({ path, content: texts[i]!, units: fileUnits })
      }
    }
    if (c.knowledgeIndex === undefined || c.query.trim() === "" || units.length < 2 || files.length === 0)
      return byRelevance(c, units)
    const ranked = yield* c.knowledgeIndex.rank({ sessionId: c.sessionId, query: c.query, files })
    return inRankOrder(units, ranked)
  })
}

/** The persisted compression summaries (`compression__context`), one unit each. */
export const compressionSource: ContextSource = {
  id: "compression",
  collect: (c) =>
    Effect.succeed(c.summaries.map((s) => ({ key: "compression__context", id: s.id, text: s.text })))
}

/** How many memories relevance may bring into one request. */
export const MAX_MEMORIES = 12

/**
 * Memory levels as a source (seed 003 "Memory (L1-L4)"): the memories most relevant to the input,
 * best first; L2 (this session's important turns) in `important_memory__context`, drawing on the
 * important-history share, L3 and L4 in `memory__context`, drawing on the semantic share. A memory
 * whose every turn is still in this session's history view is left to history (and recall); each
 * unit says where it comes from (level, session, turn).
 */
export const memorySource: ContextSource = {
  id: "memory",
  collect: (c) => {
    if (c.memory.length === 0 || c.query.trim() === "") return Effect.succeed([])
    const needed = c.memory.filter(
      (m) =>
        !m.sources.every((s) => s.session === c.sessionId && s.turn !== undefined && c.isLiveTurn(s.turn))
    )
    const byId = new Map(needed.map((m) => [m.id, m]))
    const ranked = c.rank(
      c.query,
      needed.map((m) => ({ id: m.id, text: m.text }))
    )
    return Effect.succeed(
      ranked.slice(0, MAX_MEMORIES).flatMap((hit) => {
        const m = byId.get(hit.id)
        if (m === undefined) return []
        const where = m.sources
          .map((s) => `session ${s.session}${s.turn === undefined ? "" : ` turn ${s.turn}`}`)
          .join(", ")
        return [
          {
            key: m.level === "L2" ? "important_memory__context" : "memory__context",
            id: m.id,
            ref: `${m.level}: ${where}`,
            priority: Math.round(m.importance * 100),
            text: `[${m.level} memory, from ${where}]\n${m.text}`
          }
        ]
      })
    )
  }
}

/** Extra contexts named in the manifest's `sources`: inline text or a session file. */
export const extraSource: ContextSource = {
  id: "extra",
  collect: Effect.fnUntraced(function* (c: CollectContext) {
    const units: Array<ContextUnit> = []
    for (const [key, value] of Object.entries(c.manifest.sources)) {
      const text = typeof value === "string" ? value : yield* c.read("session", value.file)
      units.push({
        key,
        id: key,
        ...(typeof value === "string" ? {} : { ref: value.file }),
        text: text.trim()
      })
    }
    return units
  })
}

/** A skill's name as the input may call it: `/name`, `$name`, or the name as a word. */
const callsSkill = (input: string, name: string) => {
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
  return new RegExp(`(^|[^\\p{L}\\p{N}_-])[/$]?${escaped}($|[^\\p{L}\\p{N}_-])`, "iu").test(input)
}

/** How many skills relevance alone may activate (named and always-on skills are beside these). */
export const RELEVANT_SKILLS = 3

/**
 * Skills (seed 003 "Skills: 按需激活"): the Markdown files of the session's skills folder
 * (`skills/` by default), one skill a file, named by the file name. On demand, a skill goes when
 * it is always on (`skills.always`), when the input calls it by name, or when it is among the
 * `RELEVANT_SKILLS` most relevant to the input; most wanted first, so the `skills` share keeps
 * those. `all` sends every skill, `none` none.
 */
export const skillsSource: ContextSource = {
  id: "skills",
  collect: Effect.fnUntraced(function* (c: CollectContext) {
    const { folder, activate, always } = c.manifest.skills
    const prefix = `${folder.replace(/\/+$/, "")}/`
    const files = c.sessionFiles.filter(
      (f) => f.startsWith(prefix) && /\.md$/i.test(f) && !f.slice(prefix.length).includes("/")
    )
    if (files.length === 0 || (activate === "none" && always.length === 0)) return []
    const texts = yield* c.readMany("session", files)
    const skills = files.map((file, i) => ({
      name: file.slice(prefix.length).replace(/\.md$/i, ""),
      file,
      text: texts[i]!.trim()
    }))
    const wanted: Array<{ readonly skill: (typeof skills)[number]; readonly why: string }> = []
    const take = (skill: (typeof skills)[number], why: string) => {
      if (!wanted.some((w) => w.skill === skill)) wanted.push({ skill, why })
    }
    for (const s of skills) if (always.includes(s.name)) take(s, "always on")
    if (activate === "all") for (const s of skills) take(s, "skills.activate is all")
    if (activate === "on-demand" && c.query.trim() !== "") {
      for (const s of skills) if (callsSkill(c.query, s.name)) take(s, "called by name")
      const ranked = c.rank(
        c.query,
        skills.map((s) => ({ id: s.name, text: `${s.name.replace(/[-_]+/g, " ")}\n${s.text}` }))
      )
      for (const r of ranked.slice(0, RELEVANT_SKILLS)) {
        const s = skills.find((k) => k.name === r.id)
        if (s !== undefined) take(s, "relevant to the input")
      }
    }
    return wanted.map(({ skill, why }) => ({
      key: "skills__context",
      position: skills.indexOf(skill),
      priority: why === "relevant to the input" ? 0 : 1,
      id: `skill:${skill.name}`,
      ref: skill.file,
      text: `## Skill: ${skill.name}\n\n${skill.text}`
    }))
  })
}

export const defaultSources: ReadonlyArray<ContextSource> = [
  sessionPromptSource,
  rulesSource,
  todoSource,
  treeSource,
  extraSource,
  profileSource,
  knowledgeSource,
  skillsSource,
  memorySource,
  metaSource,
  compressionSource
]

/** Runs the sources in order; any unit whose key does not end in `__context` is refused. */
export const collectAll = Effect.fnUntraced(function* (
  sources: ReadonlyArray<ContextSource>,
  context: CollectContext
) {
  const units: Array<ContextUnit> = []
  for (const source of sources) {
    for (const unit of yield* source.collect(context)) {
      if (!unit.key.endsWith("__context")) {
        return yield* new InvalidContextKey({
          key: unit.key,
          reason: `collector "${source.id}" returned a key that does not end in "__context"`
        })
      }
      units.push(unit)
    }
  }
  return units
})
