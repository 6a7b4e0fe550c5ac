/**
 * OpenAI-compatible chat completions over ctxo (the platform API): a client changes its base URL and
 * gets server-side context.
 *
 * - With a session, the client sends only what is new: its user message (a new turn), or the
 *   results of the tool calls the model made (the same turn goes on); the turn engine
 *   (`TurnEngine`) records them, compiles the session's context and records the answer.
 * - Without one, `fitMessages` budgets the client's own messages to the model's window: the oldest
 *   whole turns go first (a turn starts at a user message), so tool calls keep their results.
 */
import type { ChatMessage } from "@ctxo/budget/ChatFormat"
import type { ResolvedModel } from "@ctxo/budget/ModelRegistry"
import type { Counter } from "@ctxo/budget/Tokenizer"
import { Either, Schema } from "effect"
import type { RawBody } from "./ModelClient.ts"

/** A request the model cannot take: what the input needs, what the window leaves. */
export class ContextTooLong extends Schema.TaggedError<ContextTooLong>("@ctxo/agent/ContextTooLong")(
  "ContextTooLong",
  {
    model: Schema.String,
    tokens: Schema.Number,
    limit: Schema.Number,
    reason: Schema.String
  }
) {
  override get message() {
    return `This model's maximum context is ${this.limit} tokens for the input, but the request needs ${this.tokens}: ${this.reason}`
  }
}

export class InvalidCompletionRequest extends Schema.TaggedError<InvalidCompletionRequest>(
  "@ctxo/agent/InvalidCompletionRequest"
)("InvalidCompletionRequest", { reason: Schema.String }) {
  override get message() {
    return this.reason
  }
}

type Msg = Readonly<Record<string, unknown>>

/** The text of an OpenAI message content (a string or text parts). */
export const contentText = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
      ? content
          .map((p) =>
            typeof p === "object" && p !== null && (p as Msg).type === "text" ? String((p as Msg).text) : ""
          )
          .join("")
      : ""

const asChatMessage = (m: Msg): ChatMessage => ({
  role: (m.role === "developer" ? "developer" : m.role) as ChatMessage["role"],
  content: contentText(m.content) || null,
  ...(typeof m.name === "string" ? { name: m.name } : {}),
  ...(Array.isArray(m.tool_calls)
    ? {
        toolCalls: (m.tool_calls as Array<{ id: string; function: { name: string; arguments: string } }>).map(
          (c) => ({
            id: c.id,
            name: c.function.name,
            arguments: c.function.arguments
          })
        )
      }
    : {})
})

/** The input budget of a request: the model's input limit less what the answer may take. */
export const inputLimit = (model: ResolvedModel, body: RawBody) => {
  const asked = Number(body.max_completion_tokens ?? body.max_tokens ?? Number.NaN)
  const reserve = Number.isFinite(asked) ? asked : Math.ceil(model.contextWindow * 0.1)
  return Math.min(model.maxInput, model.contextWindow - reserve)
}

/** Proxy mode: the client's messages, oldest whole turns dropped until they fit (else why not). */
export const fitMessages = (options: {
  readonly messages: ReadonlyArray<Msg>
  readonly counter: Counter
  readonly limit: number
  readonly model: string
  readonly tools?: ReadonlyArray<Msg>
}) => {
  // A request's count is its framing (and tool definitions) plus each message's own: count every
  // message once, then drop whole turns by subtracting theirs.
  const empty = options.counter.countMessages([])
  const tokensOf = (m: Msg) => options.counter.countMessages([asChatMessage(m)]) - empty
  const lead: Array<Msg> = []
  let i = 0
  for (
    ;
    i < options.messages.length &&
    (options.messages[i]!.role === "system" || options.messages[i]!.role === "developer");
    i++
  )
    lead.push(options.messages[i]!)
  const turns: Array<{ messages: Array<Msg>; tokens: number }> = []
  for (const m of options.messages.slice(i)) {
    if (m.role === "user" || turns.length === 0) turns.push({ messages: [], tokens: 0 })
    const turn = turns.at(-1)!
    turn.messages.push(m)
    turn.tokens += tokensOf(m)
  }
  let dropped = 0
  let tokens =
    options.counter.countMessages(
      [],
      options.tools ? { tools: options.tools.map((t) => (t.function ?? t) as never) } : {}
    ) +
    lead.reduce((n, m) => n + tokensOf(m), 0) +
    turns.reduce((n, t) => n + t.tokens, 0)
  while (tokens > options.limit && turns.length > 1) {
    tokens -= turns.shift()!.tokens
    dropped++
  }
  if (tokens > options.limit)
    return Either.left(
      new ContextTooLong({
        model: options.model,
        tokens,
        limit: options.limit,
        reason: "the system messages and the last turn alone do not fit"
      })
    )
  return Either.right({ messages: [...lead, ...turns.flatMap((t) => t.messages)], dropped, tokens })
}
