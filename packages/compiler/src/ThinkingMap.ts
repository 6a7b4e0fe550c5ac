/**
 * The thinking map (layer one of the context design): a session's map file, and the `ContextInfo`
 * of one node (the map, the node, its ancestors root first, its dependencies with their
 * conclusions, its children, the conversation about it and the user's own context), formatted
 * into seven sections for the agent working on that node.
 *
 * The file is `map.json` in the session (`MAP_FILE` of `@ctxo/store/Paths`), described by
 * `ThinkingMapFile`; `map.schema.json` beside this package is generated from it
 * (`pnpm --filter @ctxo/compiler map-schema`) and checked by a test. The older task-tree shape
 * (`{ nodes: [{ id, title, parent?, dependsOn?, description?, content?, notes? }] }`, no map
 * title) is still accepted: `dependsOn` is read as `dependencies`, `content` as `description`, and
 * the map's title defaults to its first root node's.
 *
 * The seven sections, in this order, and the share of the budget each is granted:
 *
 * | # | section                         | share | items (kept first)                                  |
 * |---|---------------------------------|-------|-----------------------------------------------------|
 * | 1 | Task background                 | 0.05  | the agent's role and overall task                   |
 * | 2 | Map overview                    | 0.10  | title (always), core question, final goal           |
 * | 3 | Current node task               | 0.20  | title (always), question, goal, status, description, notes, conclusion, then the user context (the map's merged with the node's, one item a key) |
 * | 4 | Decomposition path (ancestors)  | 0.10  | the parent first, then up to the root               |
 * | 5 | Dependencies and conclusions    | 0.20  | in the node's order                                 |
 * | 6 | Existing sub-questions          | 0.10  | in the map's order                                  |
 * | 7 | Conversation about this node    | 0.25  | the newest message first                            |
 *
 * A section's grant is its share of the total plus whatever the sections before it left unused.
 * Items are kept whole, in the order above, until the next one does not fit; the rest are left
 * out and a marker line says how many and why (`[2 earlier messages left out: over this
 * section's 300 tokens]`). Kept items are shown in their natural order (root first, oldest message
 * first). Every section is shown, an empty one with a line saying it is empty.
 */

import type { HistoryDocument, Message } from "@ctxo/history/Message"
import { textOf } from "@ctxo/history/Message"
import { turnsOf } from "@ctxo/history/Turns"
import { clipFile, clipSentence, firstProblem } from "@ctxo/store/DecodeError"
import { Either, JSONSchema, Schema } from "effect"

/** The map's global information (`MapInfo`). */
export interface MapInfo {
  readonly title: string
  readonly coreQuestion?: string
  readonly finalGoal?: string
}

/** A node of the map (`NodeInfo`). */
export interface NodeInfo {
  readonly id: string
  readonly title: string
  readonly question?: string
  readonly goal?: string
  readonly status?: string
  readonly conclusion?: string
  readonly description?: string
  readonly notes?: string
  readonly parent?: string
  readonly dependencies: ReadonlyArray<string>
  /** The user's own context for this node (merged over the map's in `ContextInfo.userContext`). */
  readonly userContext?: Readonly<Record<string, unknown>>
}

/** Another node as the context of one node shows it (`NodeContextInfo`). */
export interface NodeContext {
  readonly id: string
  readonly title: string
  readonly question?: string
  readonly goal?: string
  readonly status?: string
  readonly conclusion?: string
}

/** One message of the conversation about a node (the turns whose input names the node). */
export interface ConversationMessage {
  readonly turn: number
  readonly role: "user" | "assistant"
  readonly text: string
}

/** Everything one node's task needs (`ContextInfo`). */
export interface ContextInfo {
  /** The agent's role and overall task (section 1, "task background"); a default when absent. */
  readonly background?: string
  readonly map: MapInfo
  readonly node: NodeInfo
  /** Root first, the node's parent last. */
  readonly ancestors: ReadonlyArray<NodeContext>
  readonly dependencies: ReadonlyArray<NodeContext>
  readonly children: ReadonlyArray<NodeContext>
  readonly conversation: ReadonlyArray<ConversationMessage>
  readonly userContext: Readonly<Record<string, unknown>>
}

// --- the file --------------------------------------------------------------------------------

const UserContext = Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
  description: "Context the user adds by hand: one entry a key, shown with the current node's task."
})

/** A string field with what it means, shown by editors from map.schema.json. */
const text = (description: string) => Schema.String.annotations({ description })

export const MapNode = Schema.Struct({
  id: text("Unique in the map: what parent, dependencies and a chat message's node name.").pipe(
    Schema.minLength(1)
  ),
  title: text("The node's short name.").pipe(Schema.minLength(1)),
  question: Schema.optional(text("The question this node answers.")),
  goal: Schema.optional(text("What answering it should achieve.")),
  status: Schema.optional(text("Usually open, in-progress, done or blocked.")),
  conclusion: Schema.optional(
    text("What working on the node concluded: shown to every node that depends on it.")
  ),
  dependencies: Schema.optional(
    Schema.Array(Schema.String).annotations({
      description: "The ids of the nodes whose conclusions this node needs (no cycles)."
    })
  ),
  parent: Schema.optional(text("The id of the node this one was broken out of (none: a root).")),
  description: Schema.optional(text("More about the task.")),
  notes: Schema.optional(text("Working notes.")),
  userContext: Schema.optional(UserContext),
  dependsOn: Schema.optional(
    Schema.Array(Schema.String).annotations({
      description: "The task tree's name for dependencies (still read)."
    })
  ),
  content: Schema.optional(text("The task tree's name for description (still read)."))
}).annotations({ identifier: "MapNode" })

export const ThinkingMapFile = Schema.Struct({
  $schema: Schema.optional(Schema.String),
  title: Schema.optional(
    text("The map's title (default: the first root node's title).").pipe(Schema.minLength(1))
  ),
  coreQuestion: Schema.optional(text("The question the whole map answers.")),
  finalGoal: Schema.optional(text("What the whole map is for.")),
  background: Schema.optional(
    text("The agent's role and overall task, shown first in every node's context (a default when absent).")
  ),
  userContext: Schema.optional(UserContext),
  nodes: Schema.Array(MapNode)
}).annotations({ identifier: "ThinkingMap" })
export type ThinkingMapFile = typeof ThinkingMapFile.Type

/** A map as the context of a node is built from: nodes with their relations resolved and checked. */
export interface ThinkingMap {
  readonly info: MapInfo
  readonly background?: string
  readonly userContext: Readonly<Record<string, unknown>>
  readonly nodes: ReadonlyArray<NodeInfo>
}

/**
 * A map file that is not valid JSON, does not match the schema, or whose nodes do not hold
 * together (a duplicate id, an unknown parent or dependency, a cycle). Names the file, the node and
 * the field.
 */
export class InvalidMap extends Schema.TaggedError<InvalidMap>("@ctxo/compiler/InvalidMap")("InvalidMap", {
  file: Schema.String,
  node: Schema.optional(Schema.String),
  field: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    const where = this.node === undefined ? "" : ` node "${this.node}":`
    return clipSentence(`Invalid thinking map ${clipFile(this.file)}:${where} ${this.field}: ${this.reason}`)
  }
}

/** A node id the map does not have. */
export class MapNodeNotFound extends Schema.TaggedError<MapNodeNotFound>("@ctxo/compiler/MapNodeNotFound")(
  "MapNodeNotFound",
  { file: Schema.String, node: Schema.String }
) {
  override get message(): string {
    return clipSentence(`The thinking map ${clipFile(this.file)} has no node "${this.node}"`)
  }
}

/** A session without a map file. */
export class MapNotFound extends Schema.TaggedError<MapNotFound>("@ctxo/compiler/MapNotFound")(
  "MapNotFound",
  {
    session: Schema.String,
    file: Schema.String
  }
) {
  override get message(): string {
    return clipSentence(`Session ${this.session} has no thinking map yet (${this.file}): write one first`)
  }
}

const decode = Schema.decodeUnknownEither(Schema.parseJson(ThinkingMapFile), {
  errors: "all",
  onExcessProperty: "error"
})

/** The id of the node at `nodes[i]` of a parse error's path, when the raw text names one. */
const nodeAt = (text: string, path: string): string | undefined => {
  const index = /^nodes\[(\d+)\]/.exec(path)?.[1]
  if (index === undefined) return undefined
  try {
    const raw = (JSON.parse(text) as { nodes?: ReadonlyArray<{ id?: unknown }> }).nodes?.[Number(index)]
    return typeof raw?.id === "string" && raw.id !== "" ? raw.id : undefined
  } catch {
    return undefined
  }
}

/** A cycle through `start` along `next`, as the ids on it (`a -> b -> a`), if there is one. */
const findCycle = (
  ids: ReadonlyArray<string>,
  next: (id: string) => ReadonlyArray<string>
): ReadonlyArray<string> | undefined => {
  const state = new Map<string, "open" | "done">()
  const path: Array<string> = []
  const visit = (id: string): ReadonlyArray<string> | undefined => {
    if (state.get(id) === "done") return undefined
    if (state.get(id) === "open") return [...path.slice(path.indexOf(id)), id]
    state.set(id, "open")
    path.push(id)
    for (const n of next(id)) {
      const cycle = visit(n)
      if (cycle !== undefined) return cycle
    }
    path.pop()
    state.set(id, "done")
    return undefined
  }
  for (const id of ids) {
    const cycle = visit(id)
    if (cycle !== undefined) return cycle
  }
  return undefined
}

const normalize = (file: ThinkingMapFile): Array<NodeInfo> =>
  file.nodes.map((n) => {
    const dependencies = [...new Set([...(n.dependencies ?? []), ...(n.dependsOn ?? [])])]
    const description = n.description ?? n.content
    return {
      id: n.id,
      title: n.title,
      ...(n.question === undefined ? {} : { question: n.question }),
      ...(n.goal === undefined ? {} : { goal: n.goal }),
      ...(n.status === undefined ? {} : { status: n.status }),
      ...(n.conclusion === undefined ? {} : { conclusion: n.conclusion }),
      ...(description === undefined ? {} : { description }),
      ...(n.notes === undefined ? {} : { notes: n.notes }),
      ...(n.parent === undefined ? {} : { parent: n.parent }),
      dependencies,
      ...(n.userContext === undefined ? {} : { userContext: n.userContext })
    }
  })

/** Checks that the nodes hold together: unique ids, known parents and dependencies, no cycle. */
const checkNodes = (nodes: ReadonlyArray<NodeInfo>, file: string): InvalidMap | undefined => {
  const invalid = (node: string, field: string, reason: string) =>
    new InvalidMap({ file, node, field, reason })
  const byId = new Map<string, NodeInfo>()
  for (const [i, n] of nodes.entries()) {
    if (byId.has(n.id)) return invalid(n.id, `nodes[${i}].id`, `the id "${n.id}" is used by an earlier node`)
    byId.set(n.id, n)
  }
  for (const n of nodes) {
    if (n.parent !== undefined && !byId.has(n.parent))
      return invalid(n.id, "parent", `no node "${n.parent}" in the map`)
    for (const d of n.dependencies) {
      if (!byId.has(d)) return invalid(n.id, "dependencies", `no node "${d}" in the map`)
      if (d === n.id) return invalid(n.id, "dependencies", "a node cannot depend on itself")
    }
  }
  const ids = nodes.map((n) => n.id)
  const parents = findCycle(ids, (id) => {
    const parent = byId.get(id)?.parent
    return parent === undefined ? [] : [parent]
  })
  if (parents !== undefined)
    return invalid(parents[0]!, "parent", `the parents form a cycle: ${parents.join(" -> ")}`)
  const dependencies = findCycle(ids, (id) => byId.get(id)?.dependencies ?? [])
  if (dependencies !== undefined)
    return invalid(
      dependencies[0]!,
      "dependencies",
      `the dependencies form a cycle: ${dependencies.join(" -> ")}`
    )
  return undefined
}

/**
 * Parses a map file's text. An invalid one is an `InvalidMap` naming the file, the node (when the
 * problem is in one) and the field.
 */
export const parseMap = (text: string, file: string): Either.Either<ThinkingMap, InvalidMap> => {
  const decoded = decode(text)
  if (Either.isLeft(decoded)) {
    const { path, problem } = firstProblem(decoded.left)
    const node = nodeAt(text, path)
    return Either.left(
      new InvalidMap({ file, ...(node === undefined ? {} : { node }), field: path, reason: problem })
    )
  }
  const doc = decoded.right
  const nodes = normalize(doc)
  const problem = checkNodes(nodes, file)
  if (problem !== undefined) return Either.left(problem)
  const title = doc.title ?? nodes.find((n) => n.parent === undefined)?.title ?? file
  return Either.right({
    info: {
      title,
      ...(doc.coreQuestion === undefined ? {} : { coreQuestion: doc.coreQuestion }),
      ...(doc.finalGoal === undefined ? {} : { finalGoal: doc.finalGoal })
    },
    ...(doc.background === undefined ? {} : { background: doc.background }),
    userContext: doc.userContext ?? {},
    nodes
  })
}

/** The published JSON Schema of a thinking map file (`map.json`). */
export const mapJsonSchema = () => ({
  title: "ctxo thinking map (map.json)",
  ...JSONSchema.make(Schema.encodedSchema(ThinkingMapFile))
})

// --- the context of one node -------------------------------------------------------------------

const contextOf = (n: NodeInfo): NodeContext => ({
  id: n.id,
  title: n.title,
  ...(n.question === undefined ? {} : { question: n.question }),
  ...(n.goal === undefined ? {} : { goal: n.goal }),
  ...(n.status === undefined ? {} : { status: n.status }),
  ...(n.conclusion === undefined ? {} : { conclusion: n.conclusion })
})

/** The user's input of a turn, and the assistant's last words in it. */
const conversationOf = (messages: ReadonlyArray<Message>, nodeId: string): Array<ConversationMessage> =>
  turnsOf(messages).flatMap((turn) => {
    const input = turn.messages.find((m) => m.role === "user" && m.meta.kind !== "reminder")
    if (input === undefined || input.meta.node !== nodeId) return []
    const answer = [...turn.messages].reverse().find((m) => m.role === "assistant" && textOf(m).trim() !== "")
    const said: Array<ConversationMessage> = [{ turn: turn.turn, role: "user", text: textOf(input).trim() }]
    if (answer !== undefined) said.push({ turn: turn.turn, role: "assistant", text: textOf(answer).trim() })
    return said
  })

/**
 * The `ContextInfo` of one node: the map, the node, its ancestors (root first), its dependencies
 * (with their conclusions), its children, the conversation about it (the turns of `history` whose
 * input names the node: the user's words and the assistant's final text) and the user context (the
 * map's, with the node's over it).
 */
export const contextInfo = (options: {
  readonly map: ThinkingMap
  readonly nodeId: string
  readonly history: HistoryDocument
  /** The map's file, for the error naming a node it does not have. */
  readonly file?: string
}): Either.Either<ContextInfo, MapNodeNotFound> => {
  const { map, nodeId } = options
  const byId = new Map(map.nodes.map((n) => [n.id, n]))
  const node = byId.get(nodeId)
  if (node === undefined)
    return Either.left(new MapNodeNotFound({ file: options.file ?? "map.json", node: nodeId }))
  const ancestors: Array<NodeContext> = []
  const seen = new Set([node.id])
  for (let p = node.parent; p !== undefined && !seen.has(p); ) {
    const parent = byId.get(p)
    if (parent === undefined) break
    seen.add(p)
    ancestors.unshift(contextOf(parent))
    p = parent.parent
  }
  return Either.right({
    ...(map.background === undefined ? {} : { background: map.background }),
    map: map.info,
    node,
    ancestors,
    dependencies: node.dependencies.flatMap((id) => {
      const d = byId.get(id)
      return d === undefined ? [] : [contextOf(d)]
    }),
    children: map.nodes.filter((n) => n.parent === node.id).map(contextOf),
    conversation: conversationOf(options.history.messages, nodeId),
    userContext: { ...map.userContext, ...node.userContext }
  })
}

// --- the seven sections ----------------------------------------------------------------------

/** The budget share a node's context draws on, in a compile (`tree__context`) and on its own. */
export const MAP_SHARE = "knowledge"

export const SECTION_IDS = [
  "background",
  "map",
  "node",
  "ancestors",
  "dependencies",
  "children",
  "conversation"
] as const
export type SectionId = (typeof SECTION_IDS)[number]

/** Each section's share of the budget (they add up to 1); what a section leaves passes on. */
export const SECTION_SHARES: Readonly<Record<SectionId, number>> = {
  background: 0.05,
  map: 0.1,
  node: 0.2,
  ancestors: 0.1,
  dependencies: 0.2,
  children: 0.1,
  conversation: 0.25
}

export const SECTION_TITLES: Readonly<Record<SectionId, string>> = {
  background: "Task background",
  map: "Map overview",
  node: "Current node task",
  ancestors: "Decomposition path (ancestors, root first)",
  dependencies: "Dependencies and their conclusions",
  children: "Existing sub-questions (children)",
  conversation: "Conversation about this node"
}

export const DEFAULT_BACKGROUND =
  "You are working on one node of a thinking map: a question broken down into smaller questions. Answer the current node's question toward its goal, building on the conclusions of its dependencies and staying consistent with the path from the root to it."

export interface FormattedSection {
  readonly id: SectionId
  readonly title: string
  readonly text: string
  /** Tokens of `text` (its heading and any cut marker included). */
  readonly tokens: number
  /** The tokens it was granted: its share plus what earlier sections left. */
  readonly budget: number
  /** How many items it had, kept and left out. */
  readonly items: number
  readonly kept: number
  readonly dropped: number
}

export interface FormattedContext {
  readonly sections: ReadonlyArray<FormattedSection>
  /** The seven sections, one after another. */
  readonly text: string
  readonly tokens: number
  readonly budget: number
}

interface Item {
  readonly text: string
  /** Shown even over the section's budget (the map's and the node's titles). */
  readonly required?: boolean
}

interface SectionPlan {
  readonly id: SectionId
  /** In the order they are shown. */
  readonly items: ReadonlyArray<Item>
  /** Which end is kept first: the newest messages, the nearest ancestors. */
  readonly keepFromEnd: boolean
  /** What the left-out items are called, by count: `2 earlier messages`. */
  readonly leftOut: (n: number) => string
  readonly empty: string
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`

const valueText = (value: unknown): string => (typeof value === "string" ? value : JSON.stringify(value))

const statusOf = (n: { readonly status?: string }) => (n.status === undefined ? "" : ` (${n.status})`)

const nodeLine = (
  n: NodeContext,
  fields: ReadonlyArray<"question" | "goal" | "conclusion">,
  noConclusion = ""
) =>
  [
    `- ${n.title} [${n.id}]${statusOf(n)}`,
    ...fields.flatMap((f) => {
      const value = n[f]
      if (value !== undefined)
        return [`  ${f === "conclusion" ? "Conclusion" : f === "goal" ? "Goal" : "Question"}: ${value}`]
      return f === "conclusion" && noConclusion !== "" ? [`  Conclusion: ${noConclusion}`] : []
    })
  ].join("\n")

const plans = (info: ContextInfo): ReadonlyArray<SectionPlan> => {
  const n = info.node
  const field = (label: string, value: string | undefined): ReadonlyArray<Item> =>
    value === undefined || value.trim() === "" ? [] : [{ text: `${label}: ${value}` }]
  return [
    {
      id: "background",
      items: [{ text: info.background ?? DEFAULT_BACKGROUND }],
      keepFromEnd: false,
      leftOut: (k) => plural(k, "item", "items"),
      empty: ""
    },
    {
      id: "map",
      items: [
        { text: `Title: ${info.map.title}`, required: true },
        ...field("Core question", info.map.coreQuestion),
        ...field("Final goal", info.map.finalGoal)
      ],
      keepFromEnd: false,
      leftOut: (k) => plural(k, "item", "items"),
      empty: ""
    },
    {
      id: "node",
      items: [
        { text: `Node: ${n.title} [${n.id}]`, required: true },
        ...field("Question", n.question),
        ...field("Goal", n.goal),
        ...field("Status", n.status),
        ...field("Description", n.description),
        ...field("Notes", n.notes),
        ...field("Conclusion so far", n.conclusion),
        ...Object.entries(info.userContext).map(([key, value]) => ({
          text: `User context, ${key}: ${valueText(value)}`
        }))
      ],
      keepFromEnd: false,
      leftOut: (k) => `${plural(k, "detail", "details")} of this node`,
      empty: ""
    },
    {
      id: "ancestors",
      items: info.ancestors.map((a) => ({ text: nodeLine(a, ["question", "goal"]) })),
      keepFromEnd: true,
      leftOut: (k) => `${plural(k, "ancestor", "ancestors")} nearest the root`,
      empty: "None: this node is a root of the map."
    },
    {
      id: "dependencies",
      items: info.dependencies.map((d) => ({ text: nodeLine(d, ["question", "conclusion"], "none yet") })),
      keepFromEnd: false,
      leftOut: (k) => plural(k, "dependency", "dependencies"),
      empty: "None: this node depends on no other node."
    },
    {
      id: "children",
      items: info.children.map((c) => ({ text: nodeLine(c, ["question", "conclusion"]) })),
      keepFromEnd: false,
      leftOut: (k) => `${plural(k, "sub-question", "sub-questions")}`,
      empty: "None yet: this node has not been broken down."
    },
    {
      id: "conversation",
      items: info.conversation.map((m) => ({
        text: `Turn ${m.turn}, ${m.role}: ${m.text}`
      })),
      keepFromEnd: true,
      leftOut: (k) => `${plural(k, "earlier message", "earlier messages")}`,
      empty: "No conversation about this node yet."
    }
  ]
}

/** Tokens an item costs in its section (its text and the line break before it). */
const itemCost = (count: (text: string) => number, item: Item) => count(item.text) + 1

/**
 * One section cut to `grant` tokens: its required items, then the others in keeping order until
 * the next does not fit, and a marker for the rest (its tokens reserved before cutting).
 */
const formatSection = (
  plan: SectionPlan,
  grant: number,
  count: (text: string) => number
): FormattedSection => {
  const title = SECTION_TITLES[plan.id]
  const number = SECTION_IDS.indexOf(plan.id) + 1
  const heading = `## ${number}. ${title}`
  const render = (lines: ReadonlyArray<string>) => [heading, ...lines].join("\n")
  const finish = (kept: ReadonlyArray<Item>, marker: string | undefined): FormattedSection => {
    const lines = kept.length === 0 && marker === undefined ? [plan.empty] : kept.map((i) => i.text)
    const text = render(marker === undefined ? lines : [...lines, marker])
    return {
      id: plan.id,
      title,
      text,
      tokens: count(text),
      budget: grant,
      items: plan.items.length,
      kept: kept.length,
      dropped: plan.items.length - kept.length
    }
  }
  const items = plan.items
  const all = render(items.length === 0 ? [plan.empty] : items.map((i) => i.text))
  if (count(all) <= grant) return finish(items, undefined)
  const markerOf = (k: number) => `[${plan.leftOut(k)} left out: over this section's ${grant} tokens]`
  const order = items.map((item, i) => ({ item, i }))
  if (plan.keepFromEnd) order.reverse()
  // The marker's cost with the largest count it can show, so the kept items and it fit together.
  let used = count(heading) + count(markerOf(items.length)) + 1
  const keep = new Set<number>()
  for (const { item, i } of order)
    if (item.required === true) {
      keep.add(i)
      used += itemCost(count, item)
    }
  for (const { item, i } of order) {
    if (keep.has(i)) continue
    const cost = itemCost(count, item)
    if (used + cost > grant) break
    keep.add(i)
    used += cost
  }
  const kept = items.filter((_, i) => keep.has(i))
  return finish(kept, kept.length === items.length ? undefined : markerOf(items.length - kept.length))
}

/**
 * The seven sections of a node's context under `budget` tokens (counted with `count`): each cut to
 * its share plus what the sections before it left unused, whole items only, with a marker where
 * items were left out.
 */
export const formatContext = (
  info: ContextInfo,
  options: { readonly budget: number; readonly count: (text: string) => number }
): FormattedContext => {
  const budget = Math.max(0, Math.floor(options.budget))
  // The blank lines between the sections come off the top, so the whole fits where they all do.
  const shared = Math.max(0, budget - (SECTION_IDS.length - 1) * options.count("\n\n"))
  const sections: Array<FormattedSection> = []
  let carried = 0
  for (const plan of plans(info)) {
    const grant = Math.floor(SECTION_SHARES[plan.id] * shared) + carried
    const section = formatSection(plan, grant, options.count)
    carried = Math.max(0, grant - section.tokens)
    sections.push(section)
  }
  const text = sections.map((s) => s.text).join("\n\n")
  return { sections, text, tokens: options.count(text), budget }
}
