/**
 * What a provider adds around the text of a chat request: per message, per tool call, per tool
 * definition, and for priming the reply. Counting a request = its texts + this overhead.
 *
 * Sources:
 * - openai: OpenAI Cookbook, "How to count tokens with tiktoken"
 *   (https://github.com/openai/openai-cookbook/blob/main/examples/How_to_count_tokens_with_tiktoken.ipynb):
 *   3 tokens per message, 1 more when it has a `name`, 3 to prime the reply; tool definitions per
 *   its `num_tokens_for_tools` (7 per function, 3 per properties block, 3 per property, -3 + 3 per
 *   enum, 12 at the end; 10 per function for cl100k models). Tool calls inside messages are not
 *   covered there: counted as name + arguments + 3 per call + 3 for the list (conservative).
 * - anthropic: no published per-message framing; 5 per message (conservative). Tool use adds a
 *   system prompt of 346 tokens ("tool use system prompt token count", Claude 4 / 3.7 models,
 *   https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/overview#pricing) plus the
 *   definitions, counted as their JSON.
 * - llama3: Meta's Llama 3 prompt format
 *   (https://www.llama.com/docs/model-cards-and-prompt-formats/llama3_1/): `<|begin_of_text|>`
 *   once, `<|start_header_id|>role<|end_header_id|>\n\n ... <|eot_id|>` per message (5), and an
 *   assistant header (5) for the reply.
 * - generic (Gemini, Mistral, Qwen, DeepSeek behind OpenAI-compatible servers): 5 per message,
 *   5 for the reply, definitions as JSON (conservative).
 */
import type { ChatFormatName } from "./ModelRegistry.ts"

export interface ToolCall {
  readonly id?: string
  readonly name: string
  /** JSON text of the arguments, as the provider returns it. */
  readonly arguments: string
}

export interface ChatMessage {
  readonly role: "system" | "developer" | "user" | "assistant" | "tool"
  readonly content: string | null
  readonly name?: string
  readonly toolCalls?: ReadonlyArray<ToolCall>
  readonly toolCallId?: string
}

export interface JsonSchemaProperty {
  readonly type?: string | ReadonlyArray<string>
  readonly description?: string
  readonly enum?: ReadonlyArray<unknown>
  readonly [key: string]: unknown
}

export interface ToolDefinition {
  readonly name: string
  readonly description?: string
  readonly parameters?: {
    readonly type?: string
    readonly properties?: Readonly<Record<string, JsonSchemaProperty>>
    readonly [key: string]: unknown
  }
}

export interface Framing {
  readonly perMessage: number
  readonly perName: number
  readonly replyPrimer: number
  readonly requestStart: number
  readonly perToolCall: number
  readonly toolCallList: number
  readonly toolUseSystemPrompt: number
}

export const framings: Readonly<Record<ChatFormatName, Framing>> = {
  openai: {
    perMessage: 3,
    perName: 1,
    replyPrimer: 3,
    requestStart: 0,
    perToolCall: 3,
    toolCallList: 3,
    toolUseSystemPrompt: 0
  },
  anthropic: {
    perMessage: 5,
    perName: 1,
    replyPrimer: 3,
    requestStart: 0,
    perToolCall: 5,
    toolCallList: 0,
    toolUseSystemPrompt: 346
  },
  llama3: {
    perMessage: 5,
    perName: 1,
    replyPrimer: 5,
    requestStart: 1,
    perToolCall: 5,
    toolCallList: 0,
    toolUseSystemPrompt: 0
  },
  generic: {
    perMessage: 5,
    perName: 1,
    replyPrimer: 5,
    requestStart: 0,
    perToolCall: 5,
    toolCallList: 3,
    toolUseSystemPrompt: 0
  }
}

const stripPeriod = (text: string) => (text.endsWith(".") ? text.slice(0, -1) : text)

/** Tokens of tool definitions per the Cookbook's `num_tokens_for_tools` (OpenAI formats). */
const openAiToolTokens = (
  tools: ReadonlyArray<ToolDefinition>,
  count: (text: string) => number,
  functionStart: number
) => {
  if (tools.length === 0) return 0
  let total = 0
  for (const tool of tools) {
    total += functionStart + count(`${tool.name}:${stripPeriod(tool.description ?? "")}`)
    const properties = Object.entries(tool.parameters?.properties ?? {})
    if (properties.length > 0) total += 3
    for (const [key, property] of properties) {
      total += 3
      if (Array.isArray(property.enum)) {
        total -= 3
        for (const item of property.enum) total += 3 + count(String(item))
      }
      const type = Array.isArray(property.type) ? property.type.join("|") : (property.type ?? "object")
      total += count(`${key}:${type}:${stripPeriod(property.description ?? "")}`)
      // Nested schemas are outside the Cookbook's formula: count their JSON (an overestimate).
      const { type: _t, description: _d, enum: _e, ...rest } = property
      if (Object.keys(rest).length > 0) total += count(JSON.stringify(rest))
    }
  }
  return total + 12
}

export interface CountRequestOptions {
  readonly format: ChatFormatName
  /** The encoding of an OpenAI format decides the per-function constant (10 for cl100k models, else 7). */
  readonly legacyFunctions?: boolean
  readonly tools?: ReadonlyArray<ToolDefinition>
}

/** Tokens of a whole chat request: every text through `count`, plus the provider's framing. */
export const countRequest = (
  messages: ReadonlyArray<ChatMessage>,
  count: (text: string) => number,
  options: CountRequestOptions
): number => {
  const framing = framings[options.format]
  let total = framing.requestStart + framing.replyPrimer
  for (const message of messages) {
    total += framing.perMessage + count(message.role)
    if (message.content !== null && message.content !== "") total += count(message.content)
    if (message.name !== undefined) total += framing.perName + count(message.name)
    const calls = message.toolCalls ?? []
    if (calls.length > 0) total += framing.toolCallList
    for (const call of calls) total += framing.perToolCall + count(call.name) + count(call.arguments)
  }
  const tools = options.tools ?? []
  if (tools.length > 0) {
    total +=
      options.format === "openai"
        ? openAiToolTokens(tools, count, options.legacyFunctions ? 10 : 7)
        : framing.toolUseSystemPrompt + count(JSON.stringify(tools))
  }
  return total
}
