/**
 * The tools source (seed 003 "Tools: 按需加载"): which tool definitions a request carries. Their
 * definitions cost tokens like any other context, so they are units of the `tools` share:
 *
 * - the client's own tools (`/v1/chat/completions` with `tools`) are the client's to choose: all
 *   of them go, required, and are counted;
 * - of the tools the gateway offers (the agent's), with `tools.load` `on-demand` (the default)
 *   only these go: those declared always-on (the tool's default, or the manifest's
 *   `tools.alwaysOn`, which replaces the defaults), those the running turn already called (its
 *   calls are in the request), and those relevant to the input (a tool whose name the input names,
 *   or that ranks with a positive score for the input); `all` sends every offered tool, `none`
 *   none;
 * - wanted tools are fitted most wanted first (always-on, used, named, then by relevance) into the
 *   share; one that does not fit is dropped with its reason, like any unit.
 *
 * Pure: the ranking is handed in (`Ranker`), the counting happens in `units.ts`.
 */
import type { ToolDefinition } from "@ctxo/budget/ChatFormat"

/** An OpenAI function tool as the wire carries it. */
export interface ToolSpec {
  readonly type: "function"
  readonly function: {
    readonly name: string
    readonly description?: string
    readonly parameters?: Readonly<Record<string, unknown>>
    readonly strict?: boolean
  }
}

/** A tool the gateway can run, with whether it is sent whatever the input. */
export interface OfferedTool {
  readonly spec: ToolSpec
  readonly alwaysOn?: boolean
}

export type ToolsLoad = "on-demand" | "all" | "none"

/** Ranks documents for a query: the positive scores, best first (`@ctxo/compiler/Relevance`). */
export type Ranker = (
  query: string,
  docs: ReadonlyArray<{ readonly id: string; readonly text: string }>
) => ReadonlyArray<{ readonly id: string; readonly score: number }>

export interface ToolChoice {
  readonly spec: ToolSpec
  /** Sent whatever the budget (the client's tools). */
  readonly required: boolean
  /** Why it is wanted, or why not (for the report). */
  readonly reason: string
}

export interface ToolSelection {
  /** Wanted, most wanted first. */
  readonly wanted: ReadonlyArray<ToolChoice>
  /** Offered but not wanted for this input, with the reason. */
  readonly notWanted: ReadonlyArray<ToolChoice>
}

/** The budget package's view of a tool (what its token count reads). */
export const toolDefinitionOf = (spec: ToolSpec): ToolDefinition => ({
  name: spec.function.name,
  ...(spec.function.description === undefined ? {} : { description: spec.function.description }),
  ...(spec.function.parameters === undefined
    ? {}
    : { parameters: spec.function.parameters as ToolDefinition["parameters"] & object })
})

/** What relevance reads of a tool: its name (words split), description and parameter descriptions. */
export const toolText = (spec: ToolSpec): string => {
  const properties = (spec.function.parameters?.properties ?? {}) as Record<string, { description?: unknown }>
  return [
    spec.function.name.replace(/[_-]+/g, " "),
    spec.function.description ?? "",
    ...Object.entries(properties).map(
      ([key, p]) => `${key} ${typeof p?.description === "string" ? p.description : ""}`
    )
  ].join("\n")
}

const namedIn = (input: string, name: string) =>
  new RegExp(`(^|[^A-Za-z0-9_])${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}($|[^A-Za-z0-9_])`).test(input)

export const selectTools = (options: {
  readonly offered: ReadonlyArray<OfferedTool>
  readonly client: ReadonlyArray<ToolSpec>
  readonly load: ToolsLoad
  /** Replaces the tools' own always-on flags when given. */
  readonly alwaysOn?: ReadonlyArray<string>
  /** What relevance is judged on: the input, or the running turn's input. */
  readonly input: string
  /** Tools the running turn has called. */
  readonly used: ReadonlySet<string>
  readonly rank: Ranker
}): ToolSelection => {
  const wanted: Array<ToolChoice> = options.client.map((spec) => ({
    spec,
    required: true,
    reason: "sent by the client"
  }))
  const taken = new Set(options.client.map((s) => s.function.name))
  const offered = options.offered.filter((t) => !taken.has(t.spec.function.name))
  if (options.load === "none")
    return {
      wanted,
      notWanted: offered.map((t) => ({ spec: t.spec, required: false, reason: "tools.load is none" }))
    }
  const alwaysOn = (t: OfferedTool) =>
    options.alwaysOn === undefined ? t.alwaysOn === true : options.alwaysOn.includes(t.spec.function.name)
  const scores = new Map(
    options.load === "all" || options.input.trim() === ""
      ? []
      : options
          .rank(
            options.input,
            offered.map((t) => ({ id: t.spec.function.name, text: toolText(t.spec) }))
          )
          .map((r) => [r.id, r.score] as const)
  )
  const why = (t: OfferedTool): { readonly order: number; readonly reason: string } | undefined => {
    const name = t.spec.function.name
    if (alwaysOn(t)) return { order: 0, reason: "always on" }
    if (options.used.has(name)) return { order: 1, reason: "called earlier in this turn" }
    if (options.load === "all") return { order: 2, reason: "tools.load is all" }
    if (namedIn(options.input, name)) return { order: 2, reason: "named in the input" }
    const score = scores.get(name)
    return score !== undefined && score > 0
      ? { order: 3 - score / (1 + score), reason: `relevant to the input (score ${score.toFixed(2)})` }
      : undefined
  }
  const ranked: Array<{ readonly tool: OfferedTool; readonly order: number; readonly reason: string }> = []
  const notWanted: Array<ToolChoice> = []
  for (const tool of offered) {
    const w = why(tool)
    if (w === undefined)
      notWanted.push({
        spec: tool.spec,
        required: false,
        reason: "loaded on demand: not always on, not called in this turn, not relevant to the input"
      })
    else ranked.push({ tool, ...w })
  }
  ranked.sort((a, b) => a.order - b.order)
  for (const r of ranked) wanted.push({ spec: r.tool.spec, required: false, reason: r.reason })
  return { wanted, notWanted }
}
