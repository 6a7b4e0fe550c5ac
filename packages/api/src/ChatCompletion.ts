/**
 * The body of `POST /v1/chat/completions`, as OpenAI defines it, as much as the gateway reads:
 * the model, the messages (system, developer, user, assistant with tool calls, tool results), the
 * tools, `stream` and `metadata`. Every other parameter (temperature, max_tokens, response_format,
 * ...) and every other field of a message passes through untouched to the upstream.
 */
import { Schema } from "effect"

/** Fields this schema does not name are kept as they are (and forwarded). */
const Rest = Schema.Record({ key: Schema.String, value: Schema.Unknown })

const TextPart = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String }, Rest)
/** Parts other than text (images, audio, files): an object with a `type`, forwarded as is. */
const OtherPart = Schema.Struct({ type: Schema.String }, Rest)
export const ContentPart = Schema.Union(TextPart, OtherPart).annotations({
  identifier: "ContentPart",
  description: "a content part: an object with a type (text parts have text)"
})

export const Content = Schema.Union(Schema.String, Schema.Array(ContentPart)).annotations({
  identifier: "Content",
  description: "a string or an array of content parts"
})

export const ToolCall = Schema.Struct(
  {
    id: Schema.String,
    type: Schema.Literal("function"),
    function: Schema.Struct({ name: Schema.String, arguments: Schema.String }, Rest)
  },
  Rest
).annotations({ identifier: "ToolCall" })

const SystemMessage = Schema.Struct(
  { role: Schema.Literal("system", "developer"), content: Content, name: Schema.optional(Schema.String) },
  Rest
).annotations({ identifier: "SystemMessage" })
const UserMessage = Schema.Struct(
  { role: Schema.Literal("user"), content: Content, name: Schema.optional(Schema.String) },
  Rest
).annotations({ identifier: "UserMessage" })
const AssistantMessage = Schema.Struct(
  {
    role: Schema.Literal("assistant"),
    content: Schema.optional(Schema.NullOr(Content)),
    name: Schema.optional(Schema.String),
    tool_calls: Schema.optional(Schema.Array(ToolCall))
  },
  Rest
).annotations({ identifier: "AssistantMessage" })
const ToolMessage = Schema.Struct(
  { role: Schema.Literal("tool"), content: Content, tool_call_id: Schema.String },
  Rest
).annotations({ identifier: "ToolMessage" })

export const ChatCompletionMessage = Schema.Union(
  SystemMessage,
  UserMessage,
  AssistantMessage,
  ToolMessage
).annotations({
  identifier: "ChatCompletionMessage",
  description: "a message with role system, developer, user, assistant or tool"
})

export const FunctionTool = Schema.Struct(
  {
    type: Schema.Literal("function"),
    function: Schema.Struct(
      {
        name: Schema.String,
        description: Schema.optional(Schema.String),
        parameters: Schema.optional(Rest)
      },
      Rest
    )
  },
  Rest
).annotations({ identifier: "FunctionTool" })

export const ChatCompletionRequest = Schema.Struct(
  {
    model: Schema.String,
    messages: Schema.Array(ChatCompletionMessage),
    tools: Schema.optional(Schema.Array(FunctionTool)),
    stream: Schema.optional(Schema.Boolean),
    /** `session_id` names the session (as the `X-Ctxo-Session` header does). */
    metadata: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
  },
  Rest
).annotations({ identifier: "ChatCompletionRequest" })
export type ChatCompletionRequest = typeof ChatCompletionRequest.Type

/** A chat completion as the upstream answers it (OpenAI's `chat.completion`; other fields pass through). */
export const ChatCompletion = Schema.Struct(
  {
    id: Schema.String,
    object: Schema.Literal("chat.completion"),
    created: Schema.Number,
    model: Schema.String,
    choices: Schema.Array(
      Schema.Struct(
        {
          index: Schema.Number,
          finish_reason: Schema.NullOr(Schema.String),
          message: Schema.Struct(
            {
              role: Schema.Literal("assistant"),
              content: Schema.NullOr(Schema.String),
              tool_calls: Schema.optional(Schema.Array(ToolCall))
            },
            Rest
          )
        },
        Rest
      )
    ),
    usage: Schema.optional(
      Schema.Struct(
        { prompt_tokens: Schema.Number, completion_tokens: Schema.Number, total_tokens: Schema.Number },
        Rest
      )
    )
  },
  Rest
).annotations({ identifier: "ChatCompletion" })
export type ChatCompletion = typeof ChatCompletion.Type
