/**
 * What the budget of a compile works with: every layer as units (the system prompt, the input,
 * context blocks, whole turns) with the tokens each adds to the rendered request, counted per
 * rendered message so a request's count is the sum of its messages plus its own framing.
 */
import type { ChatMessage, ToolDefinition } from "@ctxo/budget/ChatFormat"
import type { Unit } from "@ctxo/budget/Fit"
import type { Counter } from "@ctxo/budget/Tokenizer"
import type { Message } from "@ctxo/history/Message"
import type { Turn } from "@ctxo/history/Turns"
import type * as CompileCache from "../CompileCache.ts"
import type { AnthropicTool, OpenAIMessage, RenderedRequest } from "../Render.ts"
import { openAIMessagesOf } from "../Render.ts"
import type { ContextUnit } from "../Sources.ts"
import type { ToolSpec } from "../ToolSelection.ts"
import { toolDefinitionOf } from "../ToolSelection.ts"

export type CompileUnit = Unit &
  (
    | { readonly kind: "system_prompt" }
    | { readonly kind: "query" }
    | { readonly kind: "context"; readonly key: string; readonly position?: number }
    | { readonly kind: "tool"; readonly spec: ToolSpec }
    | {
        readonly kind: "turn"
        readonly turn: Turn
        /** Shown reduced (tool results as placeholders) to fit the budget. */
        readonly reduced?: boolean
        /** The running turn: what the model answers. */
        readonly running?: boolean
      }
  )

/** Which budget source (by the default shares' names) a context draws from. */
export const budgetSourceOf = (key: string): string =>
  key === "rules__context"
    ? "rules"
    : key === "session_prompt__context"
      ? "system_prompt"
      : key === "compression__context"
        ? "summaries"
        : key === "important_memory__context"
          ? "important_history"
          : key === "memory__context"
            ? "semantic"
            : key === "meta__context"
              ? "agent_output"
              : budgetShareOf(key)

/** The default shares' source a context's share is taken from (rules and summaries: their own). */
const budgetShareOf = (key: string): string =>
  key === "tools__context"
    ? "tools"
    : key === "todo__context"
      ? "important_history"
      : key === "experience__context"
        ? "semantic"
        : key === "knowledge__context" || key === "tree__context"
          ? "knowledge"
          : "skills"

/** One rendered OpenAI message as a chat message for counting. */
export const openAIChatMessage = (m: OpenAIMessage): ChatMessage => ({
  role: m.role,
  content: m.content,
  ...(m.role === "assistant" && m.tool_calls !== undefined
    ? {
        toolCalls: m.tool_calls.map((c) => ({
          id: c.id,
          name: c.function.name,
          arguments: c.function.arguments
        }))
      }
    : {})
})

/** A rendered request as chat messages for counting with the provider's framing. */
export const chatMessagesOf = (rendered: RenderedRequest): Array<ChatMessage> => {
  switch (rendered.format) {
    case "openai":
      return rendered.request.messages.map(openAIChatMessage)
    case "anthropic": {
      const r = rendered.request
      return [
        ...(r.system === "" ? [] : [{ role: "system" as const, content: r.system }]),
        ...r.messages.map((m) => ({ role: m.role, content: JSON.stringify(m.content) }))
      ]
    }
    case "react":
      return [{ role: "user", content: rendered.request.prompt }]
  }
}

export interface Counting {
  /** Tokens of an empty request (the reply priming). */
  readonly requestBase: number
  /** Tokens of a rendered request, or of its first `upTo` messages. */
  readonly countRequest: (rendered: RenderedRequest, upTo?: number) => number
  /** The system prompt as a unit (required). */
  readonly system: (text: string) => CompileUnit
  /** The input as a unit (required). */
  readonly query: (text: string) => CompileUnit
  /** A collector's unit, drawing from its budget source (`budgetSourceOf`). */
  readonly context: (unit: ContextUnit) => CompileUnit
  /** A text of the compiler's own (a note) as a context unit of `key`, drawing from `source`. */
  readonly note: (key: string, id: string, text: string, source: string) => CompileUnit
  /** A tool definition as a unit of the `tools` source (required: the client's). */
  readonly tool: (spec: ToolSpec, required: boolean) => CompileUnit
  /** A turn as a unit (its rendered messages with their tool calls). */
  readonly turn: (
    turn: Turn,
    source: string,
    flags?: { readonly reduced?: boolean; readonly running?: boolean; readonly required?: boolean }
  ) => CompileUnit
}

/**
 * Counting for one tokenizer. Through `cache`, a warm compile does not join, hash, render or count
 * every turn again: a turn's text and hash by its message array (the same array while the history
 * file is unchanged), the tokens of each rendered message, turn and context unit by tokenizer and
 * object, a unit's hash by the unit (the same object while its file is unchanged).
 */
export const makeCounting = (counter: Counter, cache: CompileCache.Service): Counting => {
  const requestBase = counter.countMessages([])
  const messageCache = cache.renderedTokens(counter.tokenizer)
  const messageTokens = (m: OpenAIMessage) => {
    let tokens = messageCache.get(m)
    if (tokens === undefined) {
      tokens = counter.countMessages([openAIChatMessage(m)]) - requestBase
      messageCache.set(m, tokens)
    }
    return tokens
  }
  const turnCache = cache.turnTokens(counter.tokenizer)
  const contextCache = cache.contextTokens(counter.tokenizer)
  const turnTokensOf = (messages: ReadonlyArray<Message>) => {
    let tokens = turnCache.get(messages)
    if (tokens === undefined) {
      tokens = 0
      for (const m of messages) for (const r of openAIMessagesOf(m)) tokens += messageTokens(r)
      turnCache.set(messages, tokens)
    }
    return tokens
  }
  // The tool definitions a request carries, counted by the provider's formula (a list's framing
  // is counted once per request: a unit carries it too, so the fit errs on the safe side), once
  // per object: the list of a rendering, or one tool.
  const toolTokensBy = <T extends object>(definitionsOf: (value: T) => ReadonlyArray<ToolDefinition>) => {
    const counted = new WeakMap<T, number>()
    return (value: T | undefined) => {
      if (value === undefined) return 0
      let tokens = counted.get(value)
      if (tokens === undefined) {
        const definitions = definitionsOf(value)
        tokens =
          definitions.length === 0 ? 0 : counter.countMessages([], { tools: definitions }) - requestBase
        counted.set(value, tokens)
      }
      return tokens
    }
  }
  const toolsTokens = toolTokensBy((tools: ReadonlyArray<ToolSpec>) => tools.map(toolDefinitionOf))
  const anthropicToolsTokens = toolTokensBy((tools: ReadonlyArray<AnthropicTool>) =>
    tools.map((t) => ({
      name: t.name,
      ...(t.description === undefined ? {} : { description: t.description }),
      parameters: t.input_schema
    }))
  )
  const toolUnitTokens = toolTokensBy((spec: ToolSpec) => [toolDefinitionOf(spec)])
  const countRequest = (rendered: RenderedRequest, upTo?: number) => {
    if (rendered.format === "react") {
      const all = chatMessagesOf(rendered)
      return counter.countMessages(upTo === undefined ? all : all.slice(0, upTo))
    }
    // The tools go with the request as a whole (a prefix of its messages carries none).
    if (rendered.format === "anthropic") {
      const tools = upTo === undefined ? anthropicToolsTokens(rendered.request.tools) : 0
      const all = chatMessagesOf(rendered)
      return counter.countMessages(upTo === undefined ? all : all.slice(0, upTo)) + tools
    }
    // A prefix (the emit stage's unchanged messages) is read from the running sums the request's
    // whole count left.
    const list = rendered.request.messages
    const sums = runningSums(list)
    return upTo === undefined
      ? requestBase + toolsTokens(rendered.request.tools) + sums[list.length]!
      : requestBase + sums[Math.min(upTo, list.length)]!
  }
  /** A request's messages' tokens summed message by message (`[i]`: the first i), kept by its list. */
  const prefixSums = new WeakMap<ReadonlyArray<OpenAIMessage>, Float64Array>()
  const runningSums = (list: ReadonlyArray<OpenAIMessage>) => {
    let sums = prefixSums.get(list)
    if (sums === undefined) {
      sums = new Float64Array(list.length + 1)
      for (let i = 0; i < list.length; i++) sums[i + 1] = sums[i]! + messageTokens(list[i]!)
      prefixSums.set(list, sums)
    }
    return sums
  }
  // A unit's tokens are what it adds to the rendered request: its text plus the provider's framing
  // (a context is one system message; a turn its messages with their tool calls), so the final
  // exact count rarely needs repairing.
  const framed = (message: ChatMessage) => counter.countMessages([message]) - requestBase
  const framedOnce = (u: ContextUnit) => {
    const tokens = framed({ role: "system", content: u.text })
    contextCache.set(u, tokens)
    return tokens
  }
  // A turn's unit is made once per tokenizer, source and flags: a warm compile reuses the units of
  // the turns it showed before (their objects unchanged), built from the same text and tokens.
  const turnUnits = new Map<string, Array<CompileCache.TagEntries<Turn, CompileUnit> | undefined>>()
  const turnUnitsOf = (
    source: string,
    flags: { readonly reduced?: boolean; readonly running?: boolean; readonly required?: boolean }
  ) => {
    const bits =
      (flags.reduced === true ? 1 : 0) | (flags.running === true ? 2 : 0) | (flags.required === true ? 4 : 0)
    let bySource = turnUnits.get(source)
    if (bySource === undefined) {
      bySource = []
      turnUnits.set(source, bySource)
    }
    let units = bySource[bits]
    if (units === undefined) {
      units = cache.turnUnits(`${counter.tokenizer}\u0000${source}\u0000${bits}`)
      bySource[bits] = units
    }
    return units
  }
  return {
    requestBase,
    countRequest,
    system: (text) => ({
      kind: "system_prompt",
      id: "system_prompt",
      source: "system_prompt",
      text,
      tokens: framed({ role: "system", content: text }),
      required: true
    }),
    query: (text) => ({
      kind: "query",
      id: "query",
      source: "user_input",
      text,
      tokens: framed({ role: "user", content: text }),
      required: true
    }),
    context: (u) => ({
      kind: "context",
      key: u.key,
      id: u.id,
      source: budgetSourceOf(u.key),
      text: u.text,
      hash: cache.unitHash(u),
      tokens: contextCache.get(u) ?? framedOnce(u),
      ...(u.ref ? { ref: u.ref } : {}),
      ...(u.position === undefined ? {} : { position: u.position }),
      ...(u.priority === undefined ? {} : { priority: u.priority })
    }),
    note: (key, id, text, source) => ({
      kind: "context",
      key,
      id,
      source,
      text,
      tokens: framed({ role: "system", content: text })
    }),
    tool: (spec, required) => {
      const text = JSON.stringify(spec)
      return {
        kind: "tool",
        spec,
        id: `tool:${spec.function.name}`,
        source: "tools",
        text,
        tokens: toolUnitTokens(spec),
        ...(required ? { required: true } : {})
      }
    },
    turn: (t, source, flags = {}) => {
      const units = turnUnitsOf(source, flags)
      let unit = units.get(t)
      if (unit === undefined) {
        const { text, hash } = cache.turnText(t.messages)
        unit = {
          kind: "turn",
          turn: t,
          id: `turn-${t.turn}`,
          source,
          text,
          hash,
          tokens: turnTokensOf(t.messages),
          ...(flags.reduced === true ? { reduced: true } : {}),
          ...(flags.running === true ? { running: true } : {}),
          ...(flags.required === true ? { required: true } : {})
        }
        units.set(t, unit)
      }
      return unit
    }
  }
}
