/**
 * Provider renderers: a composition to what each API accepts.
 *
 * - `openai`: chat messages; system layers stay system messages where they are; tool calls as
 *   `tool_calls`, results as `tool` messages right after.
 * - `anthropic`: one top-level `system` (the leading system layers); a system layer after the
 *   conversation has begun is folded into the next user turn (or, when none follows, the last one)
 *   as a `<system-reminder>` block; roles strictly alternate, starting with the user; `tool_use`
 *   blocks are answered by `tool_result` blocks at the start of the very next user message.
 * - `react`: the ReAct text of seed 002 E1 (`[role] text` blocks, `Action: Tool[{...}]`).
 *
 * All three are pure and deterministic: the same composition gives byte-identical output.
 */
import type { Message, ToolResultPart } from "@ctxo/history/Message"
import { textOf, toolCallsOf, toolResultsOf } from "@ctxo/history/Message"
import type { Composition } from "./Composer.ts"
import type { ToolSpec } from "./ToolSelection.ts"

export type Format = "openai" | "anthropic" | "react"

export type OpenAIMessage =
  | { readonly role: "system" | "user"; readonly content: string }
  | {
      readonly role: "assistant"
      readonly content: string | null
      readonly tool_calls?: ReadonlyArray<{
        readonly id: string
        readonly type: "function"
        readonly function: { readonly name: string; readonly arguments: string }
      }>
    }
  | { readonly role: "tool"; readonly tool_call_id: string; readonly content: string }

export type AnthropicBlock =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "tool_use"; readonly id: string; readonly name: string; readonly input: unknown }
  | {
      readonly type: "tool_result"
      readonly tool_use_id: string
      readonly content: string
      readonly is_error?: boolean
    }

export interface AnthropicMessage {
  readonly role: "user" | "assistant"
  readonly content: ReadonlyArray<AnthropicBlock>
}

/** A tool as Anthropic's Messages API takes it. */
export interface AnthropicTool {
  readonly name: string
  readonly description?: string
  readonly input_schema: Readonly<Record<string, unknown>>
}

export interface AnthropicRequest {
  readonly system: string
  readonly messages: ReadonlyArray<AnthropicMessage>
  /** The tools source's choice (absent: no tools). */
  readonly tools?: ReadonlyArray<AnthropicTool>
}

export interface OpenAIRequest {
  readonly messages: ReadonlyArray<OpenAIMessage>
  /** The tools source's choice (absent: no tools). */
  readonly tools?: ReadonlyArray<ToolSpec>
}

export interface ReActRequest {
  readonly prompt: string
}

/** A rendered request, typed by its format: narrow on `format` to read `request`. */
export type RenderedRequest =
  | { readonly format: "openai"; readonly request: OpenAIRequest }
  | { readonly format: "anthropic"; readonly request: AnthropicRequest }
  | { readonly format: "react"; readonly request: ReActRequest }

/** A tool result as the model reads it: status, data and error (seed 002 C1). */
export const toolResultContent = (part: ToolResultPart): string =>
  JSON.stringify({
    status: part.status,
    ...(part.data === undefined ? {} : { data: part.data }),
    ...(part.error === undefined ? {} : { error: part.error })
  })

// A history message renders to the same objects every time (messages are immutable, and so are
// these objects: frozen): a warm compile reuses them, and with them every per-message count and
// hash keyed by them (those live in `CompileCache`). This one stays a module-level WeakMap on
// purpose: `renderOpenAI` is a pure function any caller may use without a layer, the entries are a
// pure function of an immutable message (nothing here can go stale or leak between tenants: only
// who holds the message can look it up), and each entry lives exactly as long as its message, so
// it is bounded by what callers keep.
const openAIRendered = new WeakMap<Message, ReadonlyArray<OpenAIMessage>>()

/** The OpenAI chat messages of one history message (a tool message gives one per result). */
export const openAIMessagesOf = (message: Message): ReadonlyArray<OpenAIMessage> => {
  const cached = openAIRendered.get(message)
  if (cached !== undefined) return cached
  let rendered: Array<OpenAIMessage>
  if (message.role === "system" || message.role === "user") {
    rendered = [{ role: message.role, content: textOf(message) }]
  } else if (message.role === "assistant") {
    const calls = toolCallsOf(message)
    const text = textOf(message)
    rendered = [
      {
        role: "assistant",
        content: text === "" && calls.length > 0 ? null : text,
        ...(calls.length === 0
          ? {}
          : {
              tool_calls: calls.map((c) => ({
                id: c.callId,
                type: "function" as const,
                function: { name: c.name, arguments: JSON.stringify(c.input ?? {}) }
              }))
            })
      }
    ]
  } else {
    rendered = toolResultsOf(message).map((part) => ({
      role: "tool" as const,
      tool_call_id: part.callId,
      content: toolResultContent(part)
    }))
  }
  // Frozen, to the last nested object: their JSON is kept with them (`openAIMessageJson`), which
  // only a message nobody can change allows.
  for (const r of rendered) {
    deepFreeze(r)
    renderedJson.set(r, null)
  }
  openAIRendered.set(message, rendered)
  return rendered
}

/** Each rendered history message's JSON once asked for (`null` before), by the rendered object. */
const renderedJson = new WeakMap<object, string | null>()

/**
 * The JSON text of an object `openAIMessagesOf` rendered (`JSON.stringify`'s, made once per object:
 * the object is frozen, so it never goes stale); `undefined` for anything else. The compile's
 * message hashes and the upstream body (`@ctxo/agent/ModelClient`'s `requestBody`) both read a
 * history message's JSON here: each message of a session is serialized once in the process.
 */
export const openAIMessageJson = (value: unknown): string | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  const kept = renderedJson.get(value)
  if (kept !== null) return kept
  const json = JSON.stringify(value)
  renderedJson.set(value, json)
  return json
}

const deepFreeze = (value: object): void => {
  for (const inner of Object.values(value)) if (typeof inner === "object" && inner !== null) deepFreeze(inner)
  Object.freeze(value)
}

export const renderOpenAI = (composition: Composition): OpenAIRequest => {
  const messages: Array<OpenAIMessage> = []
  for (const layer of composition.layers) {
    if (layer._tag === "system") messages.push({ role: "system", content: layer.text })
    else if (layer._tag === "query") messages.push({ role: "user", content: layer.text })
    else
      for (const message of layer.messages) {
        const rendered = openAIMessagesOf(message)
        if (rendered.length === 1) messages.push(rendered[0]!)
        else for (const r of rendered) messages.push(r)
      }
  }
  return composition.tools === undefined ? { messages } : { messages, tools: composition.tools }
}

export const systemReminder = (text: string): string => `<system-reminder>\n${text}\n</system-reminder>`

export const renderAnthropic = (composition: Composition): AnthropicRequest => {
  const system: Array<string> = []
  const turns: Array<{ role: "user" | "assistant"; content: Array<AnthropicBlock> }> = []
  let pending: Array<string> = []
  let started = false

  const push = (role: "user" | "assistant", blocks: ReadonlyArray<AnthropicBlock>) => {
    if (blocks.length === 0) return
    started = true
    let content = [...blocks]
    if (role === "user" && pending.length > 0) {
      content = [
        ...content,
        ...pending.map((text): AnthropicBlock => ({ type: "text", text: systemReminder(text) }))
      ]
      pending = []
    }
    const last = turns.at(-1)
    if (last !== undefined && last.role === role) last.content.push(...content)
    else turns.push({ role, content })
  }

  const history = (message: Message) => {
    if (message.role === "system") {
      pending.push(textOf(message))
      started = true
    } else if (message.role === "user") push("user", [{ type: "text", text: textOf(message) }])
    else if (message.role === "assistant") {
      const blocks: Array<AnthropicBlock> = []
      const text = textOf(message)
      if (text !== "") blocks.push({ type: "text", text })
      for (const call of toolCallsOf(message))
        blocks.push({ type: "tool_use", id: call.callId, name: call.name, input: call.input ?? {} })
      push("assistant", blocks)
    } else {
      push(
        "user",
        toolResultsOf(message).map((part) => ({
          type: "tool_result" as const,
          tool_use_id: part.callId,
          content: toolResultContent(part),
          ...(part.status === "error" ? { is_error: true } : {})
        }))
      )
    }
  }

  for (const layer of composition.layers) {
    if (layer._tag === "system") {
      if (!started) system.push(layer.text)
      else pending.push(layer.text)
    } else if (layer._tag === "query") push("user", [{ type: "text", text: layer.text }])
    else layer.messages.forEach(history)
  }
  // Reminders with no user turn after them go to the last user turn.
  if (pending.length > 0) {
    const lastUser = [...turns].reverse().find((t) => t.role === "user")
    const blocks = pending.map((text): AnthropicBlock => ({ type: "text", text: systemReminder(text) }))
    if (lastUser !== undefined) lastUser.content.push(...blocks)
    else turns.push({ role: "user", content: blocks })
    pending = []
  }
  // The conversation starts with the user; tool results lead their user message.
  if (turns[0]?.role === "assistant") {
    turns.unshift({
      role: "user",
      content: [{ type: "text", text: systemReminder("The conversation so far continues below.") }]
    })
  }
  for (const turn of turns) {
    if (turn.role === "user") {
      turn.content.sort((a, b) => Number(b.type === "tool_result") - Number(a.type === "tool_result"))
    }
  }
  return {
    system: system.join("\n\n"),
    messages: turns,
    ...(composition.tools === undefined
      ? {}
      : {
          tools: composition.tools.map((t) => ({
            name: t.function.name,
            ...(t.function.description === undefined ? {} : { description: t.function.description }),
            input_schema: t.function.parameters ?? { type: "object", properties: {} }
          }))
        })
  }
}

/** The tools in a ReAct prompt: one line each, `name[{json arguments}]: description`. */
const reactTools = (tools: ReadonlyArray<ToolSpec>): string =>
  [
    "Tools (call one as `Action: name[{json arguments}]`):",
    ...tools.map((t) => {
      const properties = Object.keys(
        (t.function.parameters?.properties ?? {}) as Readonly<Record<string, unknown>>
      )
      return `- ${t.function.name}[{${properties.join(", ")}}]: ${t.function.description ?? ""}`.trimEnd()
    })
  ].join("\n")

/** Seed 002 E1: the ReAct text format, one `[role] text` block per message. */
export const renderReAct = (composition: Composition): ReActRequest => {
  const blocks: Array<string> = []
  const history = (message: Message) => {
    if (message.role === "tool") {
      for (const part of toolResultsOf(message)) blocks.push(`[tool] ${toolResultContent(part)}`)
      return
    }
    const lines = [textOf(message)]
    for (const call of toolCallsOf(message)) {
      if (!lines[0]!.includes(`Action: ${call.name}[`))
        lines.push(`Action: ${call.name}[${JSON.stringify(call.input ?? {})}]`)
    }
    blocks.push(`[${message.role}] ${lines.filter((l) => l !== "").join("\n")}`)
  }
  let toolsShown = composition.tools === undefined
  const showTools = () => {
    if (!toolsShown) blocks.push(`[system] ${reactTools(composition.tools!)}`)
    toolsShown = true
  }
  for (const layer of composition.layers) {
    // The tools go after the leading system layers (the static prefix), before anything else.
    if (layer._tag !== "system") showTools()
    if (layer._tag === "system") blocks.push(`[system] ${layer.text}`)
    else if (layer._tag === "query") blocks.push(`[user] ${layer.text}`)
    else layer.messages.forEach(history)
  }
  showTools()
  return { prompt: blocks.join("\n\n") }
}

export const render = (composition: Composition, format: Format): RenderedRequest => {
  switch (format) {
    case "openai":
      return { format, request: renderOpenAI(composition) }
    case "anthropic":
      return { format, request: renderAnthropic(composition) }
    case "react":
      return { format, request: renderReAct(composition) }
  }
}
