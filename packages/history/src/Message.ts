/**
 * The message model of a session's history (`messages.json`), in effect/Schema.
 *
 * A message has parts: text, tool calls and tool results (status, compressed data, error). Its
 * meta says which turn and step it belongs to and what kind it is. The file keeps everything:
 * compaction archives messages (`archivedBy`), curation dismisses or excludes them, and the
 * compiled view (`HistoryView`) decides what a model sees.
 *
 * Summaries are not messages: they live beside them (`compression`), are never compacted again,
 * and are rendered as system messages in L3. That is `compression__context`, kept so a restore has it.
 */
import { Schema } from "effect"

export const Role = Schema.Literal("user", "assistant", "tool", "system")
export type Role = typeof Role.Type

export const TextPart = Schema.TaggedStruct("text", { text: Schema.String })
export type TextPart = typeof TextPart.Type

export const ToolCallPart = Schema.TaggedStruct("tool-call", {
  callId: Schema.String,
  name: Schema.String,
  input: Schema.Unknown
})
export type ToolCallPart = typeof ToolCallPart.Type

export const ToolError = Schema.Struct({
  code: Schema.optional(Schema.String),
  message: Schema.String
})
export type ToolError = typeof ToolError.Type

export const ToolResultPart = Schema.TaggedStruct("tool-result", {
  callId: Schema.String,
  name: Schema.String,
  status: Schema.Literal("success", "error"),
  data: Schema.optional(Schema.Unknown),
  error: Schema.optional(ToolError),
  /** Where the full, uncompressed result is kept (relative to the session directory). */
  full: Schema.optional(Schema.String)
})
export type ToolResultPart = typeof ToolResultPart.Type

export const Part = Schema.Union(TextPart, ToolCallPart, ToolResultPart)
export type Part = typeof Part.Type

export const MessageKind = Schema.Literal("input", "step", "final", "reminder", "summary")
export type MessageKind = typeof MessageKind.Type

export const Dismissal = Schema.Struct({
  by: Schema.Literal("model", "user"),
  /** What the placeholder says instead of the original (the model's or the user's words). */
  summary: Schema.String,
  /** The dismiss_memory call that did it, when the model did. */
  callId: Schema.optional(Schema.String)
})
export type Dismissal = typeof Dismissal.Type

/**
 * A reference recorded with a user input, in the manifest's shape: the inline form
 * (`[file:12:30]`, `[file#Block]`), `{ path, startLine, endLine }` or `{ path, block }`.
 */
export const InputReference = Schema.Union(
  Schema.Struct({
    path: Schema.String,
    startLine: Schema.Int.pipe(Schema.positive()),
    endLine: Schema.Int.pipe(Schema.positive())
  }),
  Schema.Struct({ path: Schema.String, block: Schema.String }),
  Schema.String
)
export type InputReference = typeof InputReference.Type

export const MessageMeta = Schema.Struct({
  turn: Schema.Int,
  step: Schema.optional(Schema.Int),
  kind: Schema.optional(MessageKind),
  /** Idempotency key of the user input that opened the turn (input messages only). */
  inputKey: Schema.optional(Schema.String),
  /** References that came with the input (input messages only): resolved each time the turn compiles. */
  references: Schema.optional(Schema.Array(InputReference)),
  /** The thinking-map node the input is about (input messages only): its node's conversation. */
  node: Schema.optional(Schema.String),
  /**
   * What the provider reported for the request that produced this assistant message (input and
   * output tokens): the latest is the compaction trigger's "last usage", kept across restarts.
   */
  usage: Schema.optional(Schema.Struct({ inputTokens: Schema.Int, outputTokens: Schema.Int })),
  /** Set on the turn's last assistant message when the assistant finished. */
  finished: Schema.optional(Schema.Boolean),
  pinned: Schema.optional(Schema.Boolean),
  dismissed: Schema.optional(Dismissal),
  /** The summary that archived this message (compaction). The file keeps it; the view leaves it out. */
  archivedBy: Schema.optional(Schema.String),
  createdAt: Schema.optional(Schema.String)
})
export type MessageMeta = typeof MessageMeta.Type

export const Message = Schema.Struct({
  id: Schema.String,
  role: Role,
  parts: Schema.Array(Part),
  meta: MessageMeta
})
export type Message = typeof Message.Type

export const Summary = Schema.Struct({
  id: Schema.String,
  text: Schema.String,
  fromTurn: Schema.Int,
  toTurn: Schema.Int,
  messageCount: Schema.Int,
  createdAt: Schema.optional(Schema.String)
})
export type Summary = typeof Summary.Type

export const HISTORY_FORMAT = "ctxo.history/v1"

/** What `messages.json` holds. */
export const HistoryDocument = Schema.Struct({
  format: Schema.Literal(HISTORY_FORMAT),
  messages: Schema.Array(Message),
  /** `compression__context`: the summaries, oldest first. */
  compression: Schema.Array(Summary)
})
export type HistoryDocument = typeof HistoryDocument.Type

export const emptyHistory: HistoryDocument = { format: HISTORY_FORMAT, messages: [], compression: [] }

export const textOf = (message: Message): string =>
  message.parts
    .filter((p): p is TextPart => p._tag === "text")
    .map((p) => p.text)
    .join("")

export const toolCallsOf = (message: Message): Array<ToolCallPart> =>
  message.parts.filter((p): p is ToolCallPart => p._tag === "tool-call")

export const toolResultsOf = (message: Message): Array<ToolResultPart> =>
  message.parts.filter((p): p is ToolResultPart => p._tag === "tool-result")

/** The usage reported for the session's latest request (0 when none was recorded). */
export const lastUsageOf = (doc: HistoryDocument): number => {
  for (let i = doc.messages.length - 1; i >= 0; i--) {
    const usage = doc.messages[i]!.meta.usage
    if (usage !== undefined) return usage.inputTokens + usage.outputTokens
  }
  return 0
}
