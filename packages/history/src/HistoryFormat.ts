/**
 * Reading a history file (`messages.json`) in either of its two forms:
 *
 * - the v1 document, `{ format: "ctxo.history/v1", messages, compression }`, which is what ctxo
 *   writes;
 * - a plain array of chat messages, as people and other tools write them: `[]` for a new session,
 *   `{ role, content }` with a string or a list of parts (`text`, `tool-call`/`tool_use`,
 *   `tool-result`/`tool_result`), and OpenAI messages whose assistant `tool_calls` are answered by
 *   `tool` messages (`tool_call_id`).
 *
 * A plain array becomes a v1 document: each user message opens a turn (numbered from 1; anything
 * before the first user message belongs to turn 1), the turn's last assistant message, when it has
 * text, is its final answer (the turn is finished), tool calls and their results become parts. Written
 * back as v1 and read again, nothing is lost: roles, texts, tool calls and results stay the same.
 *
 * Anything else is a `HistoryCorrupt` whose message names the file, the JSON path and what was
 * expected, in one sentence.
 */
import { problemOf } from "@ctxo/store/DecodeError"
import type { ParseResult } from "effect"
import { Either, Schema } from "effect"
import { HistoryCorrupt } from "./HistoryErrors.ts"
import type { HistoryDocument, Message, MessageMeta, Part, Role } from "./Message.ts"
import { HISTORY_FORMAT, HistoryDocument as HistoryDocumentSchema, Role as RoleSchema } from "./Message.ts"

const TextContent = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })
const ToolCallContent = Schema.Struct({
  type: Schema.Literal("tool-call", "tool_use"),
  toolCallId: Schema.optional(Schema.String),
  id: Schema.optional(Schema.String),
  toolName: Schema.optional(Schema.String),
  name: Schema.optional(Schema.String),
  input: Schema.optional(Schema.Unknown),
  args: Schema.optional(Schema.Unknown)
})
const ToolResultContent = Schema.Struct({
  type: Schema.Literal("tool-result", "tool_result"),
  toolCallId: Schema.optional(Schema.String),
  tool_use_id: Schema.optional(Schema.String),
  toolName: Schema.optional(Schema.String),
  output: Schema.optional(Schema.Unknown),
  result: Schema.optional(Schema.Unknown),
  content: Schema.optional(Schema.Unknown),
  is_error: Schema.optional(Schema.Boolean),
  isError: Schema.optional(Schema.Boolean)
})
const ContentPart = Schema.Union(TextContent, ToolCallContent, ToolResultContent)

const OpenAIToolCall = Schema.Struct({
  id: Schema.String,
  type: Schema.optional(Schema.Literal("function")),
  function: Schema.Struct({ name: Schema.String, arguments: Schema.optional(Schema.Unknown) })
})

/** One message of a plain-array history file. */
export const PlainMessage = Schema.Struct({
  id: Schema.optional(Schema.String),
  role: RoleSchema,
  content: Schema.optional(Schema.NullOr(Schema.Union(Schema.String, Schema.Array(ContentPart)))),
  tool_calls: Schema.optional(Schema.Array(OpenAIToolCall)),
  tool_call_id: Schema.optional(Schema.String),
  name: Schema.optional(Schema.String)
})
export type PlainMessage = typeof PlainMessage.Type

const decodeV1 = Schema.decodeUnknownEither(HistoryDocumentSchema, { errors: "all" })
/**
 * A v1 document that is one already, field for field (nothing more): decoding it would make a copy of
 * every message, and the store keeps the JSON it read beside the document history keeps.
 */
const isV1 = Schema.is(HistoryDocumentSchema, { onExcessProperty: "error" })
const decodePlain = Schema.decodeUnknownEither(Schema.Array(PlainMessage), { errors: "all" })

const corrupt = (file: string, error: ParseResult.ParseError) => {
  return new HistoryCorrupt({ file, reason: problemOf(error) })
}

/** A tool result's content as text was written by a renderer: `{ status, data?, error? }` when it is that. */
const resultFromContent = (
  content: unknown
): Pick<Extract<Part, { _tag: "tool-result" }>, "status" | "data" | "error"> => {
  let value = content
  if (typeof content === "string") {
    try {
      value = JSON.parse(content)
    } catch {
      return { status: "success", data: content }
    }
  }
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const o = value as Record<string, unknown>
    const keys = Object.keys(o)
    const error = o.error
    const validError =
      error === undefined ||
      (typeof error === "object" &&
        error !== null &&
        typeof (error as { message?: unknown }).message === "string")
    if (
      (o.status === "success" || o.status === "error") &&
      validError &&
      keys.every((k) => k === "status" || k === "data" || k === "error")
    ) {
      return {
        status: o.status,
        ...(o.data === undefined ? {} : { data: o.data }),
        ...(error === undefined ? {} : { error: error as { message: string; code?: string } })
      }
    }
  }
  return { status: "success", data: content }
}

const parseArguments = (args: unknown): unknown => {
  if (typeof args !== "string") return args ?? {}
  try {
    return JSON.parse(args)
  } catch {
    return args
  }
}

/** A plain array of chat messages as a v1 history document (turns, steps, final answers). */
export const fromPlainMessages = (plain: ReadonlyArray<PlainMessage>): HistoryDocument => {
  const callNames = new Map<string, string>()
  const converted: Array<{ role: Role; parts: Array<Part>; id?: string; input: boolean }> = []
  for (const m of plain) {
    const parts: Array<Part> = []
    const content = m.content ?? ""
    if (typeof content === "string") {
      if (m.role === "tool") {
        const callId = m.tool_call_id ?? ""
        parts.push({
          _tag: "tool-result",
          callId,
          name: m.name ?? callNames.get(callId) ?? "tool",
          ...resultFromContent(content)
        })
      } else if (content !== "") parts.push({ _tag: "text", text: content })
    } else {
      for (const p of content) {
        if (p.type === "text") parts.push({ _tag: "text", text: p.text })
        else if (p.type === "tool-call" || p.type === "tool_use") {
          const callId = p.toolCallId ?? p.id ?? ""
          const name = p.toolName ?? p.name ?? "tool"
          callNames.set(callId, name)
          parts.push({ _tag: "tool-call", callId, name, input: parseArguments(p.input ?? p.args) })
        } else if (p.type === "tool-result" || p.type === "tool_result") {
          const callId = p.toolCallId ?? p.tool_use_id ?? m.tool_call_id ?? ""
          const raw = p.output ?? p.result ?? p.content
          const result = resultFromContent(raw)
          parts.push({
            _tag: "tool-result",
            callId,
            name: p.toolName ?? callNames.get(callId) ?? m.name ?? "tool",
            ...result,
            ...(p.is_error === true || p.isError === true ? { status: "error" as const } : {})
          })
        }
      }
    }
    for (const call of m.tool_calls ?? []) {
      callNames.set(call.id, call.function.name)
      parts.push({
        _tag: "tool-call",
        callId: call.id,
        name: call.function.name,
        input: parseArguments(call.function.arguments)
      })
    }
    // A user message that only carries tool results answers calls; it does not open a turn.
    const onlyResults = parts.length > 0 && parts.every((p) => p._tag === "tool-result")
    const role: Role = m.role === "user" && onlyResults ? "tool" : m.role
    converted.push({ role, parts, ...(m.id === undefined ? {} : { id: m.id }), input: role === "user" })
  }

  const messages: Array<Message> = []
  const ids = new Set<string>()
  let inputs = 0
  const perTurn = new Map<number, number>()
  const steps = new Map<number, number>()
  for (const c of converted) {
    if (c.input) inputs++
    const turn = Math.max(1, inputs)
    const index = perTurn.get(turn) ?? 0
    perTurn.set(turn, index + 1)
    if (c.role === "assistant") steps.set(turn, (steps.get(turn) ?? 0) + 1)
    const step = steps.get(turn)
    const id = c.id !== undefined && !ids.has(c.id) ? c.id : `t${turn}-${index}`
    ids.add(id)
    const meta: MessageMeta = c.input
      ? { turn, kind: "input" }
      : c.role === "assistant" || c.role === "tool"
        ? { turn, ...(step === undefined ? {} : { step }), kind: "step" }
        : { turn }
    messages.push({ id, role: c.role, parts: c.parts, meta })
  }
  // The last assistant message of a turn, when it has text, is the turn's final answer.
  const lastAssistant = new Map<number, number>()
  messages.forEach((m, i) => {
    if (m.role === "assistant") lastAssistant.set(m.meta.turn, i)
  })
  for (const index of lastAssistant.values()) {
    const m = messages[index]!
    const later = messages.slice(index + 1).some((n) => n.meta.turn === m.meta.turn && n.role === "tool")
    if (!later && m.parts.some((p) => p._tag === "text" && p.text !== "")) {
      messages[index] = { ...m, meta: { ...m.meta, kind: "final", finished: true } }
    }
  }
  return { format: HISTORY_FORMAT, messages, compression: [] }
}

/**
 * Decodes the text of a history file (`file` names it in errors): the v1 document, or a plain
 * array of chat messages converted to one.
 */
export const decodeHistoryText = (
  text: string,
  file: string
): Either.Either<HistoryDocument, HistoryCorrupt> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    const reason = e instanceof Error ? e.message.replace(/\s+/g, " ").slice(0, 120) : "syntax error"
    return Either.left(new HistoryCorrupt({ file, reason: `(root): not valid JSON (${reason})` }))
  }
  return decodeHistoryJson(json, file)
}

/** A history already parsed from JSON (a request body's), decoded as `decodeHistoryText` does. */
export const decodeHistoryJson = (
  json: unknown,
  file: string
): Either.Either<HistoryDocument, HistoryCorrupt> => {
  if (Array.isArray(json)) {
    return decodePlain(json).pipe(
      Either.mapBoth({ onLeft: (error) => corrupt(file, error), onRight: fromPlainMessages })
    )
  }
  if (typeof json !== "object" || json === null) {
    return Either.left(
      new HistoryCorrupt({
        file,
        reason: `(root): expected an object with format "${HISTORY_FORMAT}" or an array of messages, got ${
          json === null ? "null" : typeof json
        }`
      })
    )
  }
  if (isV1(json)) return Either.right(json)
  return decodeV1(json).pipe(Either.mapLeft((error) => corrupt(file, error)))
}
