/**
 * The compile manifest, `context-config.json` (seed 000): a complete description of one LLM call.
 * Every value is a reference the compiler resolves to content. Beyond seed 000: the ordering
 * policy, the model, budget overrides, extra sources, the process role and `enableShareContext`
 * (seed 001). `manifest.schema.json` beside this package is generated from this schema
 * (`pnpm --filter @ctxo/compiler manifest-schema`) and checked by a test.
 */

import { firstProblem } from "@ctxo/store/DecodeError"
import { MAP_FILE } from "@ctxo/store/Paths"
import type { ParseResult } from "effect"
import { Either, JSONSchema, Schema } from "effect"
import { InvalidManifest } from "./CompilerErrors.ts"

export const PolicyName = Schema.Literal("layered", "code-agent", "notebook")
export type PolicyName = typeof PolicyName.Type

export const SystemPromptSource = Schema.Struct({
  /** `global` files live in the data root, `session` files in the session directory. */
  type: Schema.Literal("global", "session"),
  file: Schema.String
})

export const LineReference = Schema.Struct({
  path: Schema.String,
  startLine: Schema.Int.pipe(Schema.positive()),
  endLine: Schema.Int.pipe(Schema.positive())
})

export const BlockReference = Schema.Struct({
  path: Schema.String,
  /** A heading path (`Parent/Child`) or a short id (`^b3`). */
  block: Schema.String
})

/** `{ path, startLine, endLine }`, `{ path, block }`, or the inline forms `[file:12:30]` / `[file#Block]`. */
export const Reference = Schema.Union(LineReference, BlockReference, Schema.String)
export type Reference = typeof Reference.Type

export const ChatHistory = Schema.Struct({
  source: Schema.optionalWith(Schema.String, { default: () => "messages.json" }),
  /** `full`: everything the budget allows; `recent`: at most `maxTurns` newest whole turns; `none`. */
  strategy: Schema.optionalWith(Schema.Literal("full", "recent", "none"), { default: () => "full" as const }),
  maxTurns: Schema.optional(Schema.Int.pipe(Schema.positive()))
})

export const KnowledgeSource = Schema.Struct({
  /** A file, a glob (`docs/*.md`), or a file with a block (`{ path, block }`). */
  path: Schema.String,
  block: Schema.optional(Schema.String)
})

export const TreeSource = Schema.Struct({
  /**
   * The session's thinking map (`ThinkingMap`, published as map.schema.json; the older task tree
   * `{ nodes: [{ id, title, parent?, dependsOn?, description? }] }` is read too), default `map.json`.
   */
  file: Schema.optionalWith(Schema.String, { default: () => MAP_FILE }),
  /** The node the agent works on: its context is shown in seven sections (`tree__context`). */
  node: Schema.String
})

export const ToolsConfig = Schema.Struct({
  /**
   * `on-demand` (default): only tools declared always-on, tools the running turn called, and tools
   * relevant to the input; `all`: every tool the gateway offers; `none`: none (the client's own
   * tools always go). Whatever goes is counted against the `tools` share.
   */
  load: Schema.optionalWith(Schema.Literal("on-demand", "all", "none"), {
    default: () => "on-demand" as const
  }),
  /** Tool names sent whatever the input; replaces the tools' own defaults when given. */
  alwaysOn: Schema.optional(Schema.Array(Schema.String))
})

export const SkillsConfig = Schema.Struct({
  /** The session folder of skills: one Markdown file a skill, named by its file name. */
  folder: Schema.optionalWith(Schema.String, { default: () => "skills" }),
  /**
   * `on-demand` (default): a skill goes when the input names it (`/name`, `$name`, or the name as
   * a word) or when it ranks relevant to the input; `all`: every skill; `none`: none.
   */
  activate: Schema.optionalWith(Schema.Literal("on-demand", "all", "none"), {
    default: () => "on-demand" as const
  }),
  /** Skills sent whatever the input. */
  always: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] })
})

export const ProcessRole = Schema.Literal("agent", "map-worker", "map-planner", "reducer")
export type ProcessRole = typeof ProcessRole.Type

export const BudgetOverrides = Schema.Struct({
  outputReserve: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
  outputReserveRatio: Schema.optional(Schema.Number.pipe(Schema.between(0, 0.9))),
  shares: Schema.optional(
    Schema.Record({ key: Schema.String, value: Schema.Number.pipe(Schema.between(0, 1)) })
  )
})

export const Manifest = Schema.Struct({
  $schema: Schema.optional(Schema.String),
  policy: Schema.optionalWith(PolicyName, { default: () => "notebook" as const }),
  model: Schema.optional(Schema.String),
  systemPrompt: Schema.optionalWith(Schema.Array(SystemPromptSource), { default: () => [] }),
  profileBlocks: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  /** Profile file for `profileBlocks` (data root), default `profile.md`. */
  profile: Schema.optionalWith(Schema.String, { default: () => "profile.md" }),
  chatHistory: Schema.optionalWith(ChatHistory, {
    default: () => ({ source: "messages.json", strategy: "full" as const })
  }),
  query: Schema.optional(Schema.String),
  references: Schema.optionalWith(Schema.Array(Reference), { default: () => [] }),
  knowledge: Schema.optionalWith(Schema.Array(KnowledgeSource), { default: () => [] }),
  /** A todo file, or `milestones.md` with Markdown task lists (default when present). */
  todo: Schema.optional(Schema.String),
  tree: Schema.optional(TreeSource),
  /** Extra contexts by key (`experience__context`, ...): inline text or `{ file }`. */
  sources: Schema.optionalWith(
    Schema.Record({
      key: Schema.String,
      value: Schema.Union(Schema.String, Schema.Struct({ file: Schema.String }))
    }),
    { default: () => ({}) }
  ),
  budget: Schema.optionalWith(BudgetOverrides, { default: () => ({}) }),
  tools: Schema.optionalWith(ToolsConfig, { default: () => ({ load: "on-demand" as const }) }),
  skills: Schema.optionalWith(SkillsConfig, {
    default: () => ({ folder: "skills", activate: "on-demand" as const, always: [] })
  }),
  /** What the agent's tools may do: `writeControlFiles` lets `write_file` change context-config.json. */
  agent: Schema.optionalWith(
    Schema.Struct({ writeControlFiles: Schema.optionalWith(Schema.Boolean, { default: () => false }) }),
    { default: () => ({ writeControlFiles: false }) }
  ),
  process: Schema.optionalWith(
    Schema.Struct({
      role: Schema.optionalWith(ProcessRole, { default: () => "agent" as const }),
      enableShareContext: Schema.optional(Schema.Boolean),
      /** With sharing off, still inject `knowledge__context`. */
      knowledge: Schema.optionalWith(Schema.Boolean, { default: () => false })
    }),
    { default: () => ({ role: "agent" as const, knowledge: false }) }
  )
})
export type Manifest = typeof Manifest.Type
export type ManifestInput = typeof Manifest.Encoded

const decode = Schema.decodeUnknownEither(Schema.parseJson(Manifest), {
  errors: "all",
  onExcessProperty: "error"
})

/** The first problem of a parse error: the field's JSON path and what was expected there. */
const firstIssue = (error: ParseResult.ParseError): { field: string; reason: string } => {
  const { path, problem } = firstProblem(error)
  return { field: path, reason: problem }
}

/** Parses a manifest's JSON; an invalid one is an `InvalidManifest` naming the file and the field. */
export const parseManifest = (
  text: string,
  file = "context-config.json"
): Either.Either<Manifest, InvalidManifest> =>
  decode(text).pipe(Either.mapLeft((error) => new InvalidManifest({ file, ...firstIssue(error) })))

/** The published JSON Schema of `context-config.json`. */
export const manifestJsonSchema = () => ({
  title: "ctxo compile manifest (context-config.json)",
  ...JSONSchema.make(Schema.encodedSchema(Manifest))
})
