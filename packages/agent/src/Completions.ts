/**
 * OpenAI-compatible chat completions over ctxo (the platform API): a client changes its base URL and
 * gets server-side context.
 *
 * - With a session, the client sends only what is new: its user message (a new turn), or the
 *   results of the tool calls the model made (the same turn goes on). ctxo records them through the
 *   history recorder, compiles the session's context for the requested model, and forwards it with
 *   the client's parameters; `recordAnswer` records what came back.
 * - Without one, `fitMessages` budgets the client's own messages to the model's window: the oldest
 *   whole turns go first (a turn starts at a user message), so tool calls keep their results.
 */
import type { ChatMessage } from "@ctxo/budget/ChatFormat"
import type { ResolvedModel } from "@ctxo/budget/ModelRegistry"
import type { Counter } from "@ctxo/budget/Tokenizer"
import { compile } from "@ctxo/compiler/Compile"
import { HistoryStore } from "@ctxo/history/HistoryStore"
import { textOf } from "@ctxo/history/Message"
import { endTurn, recordStep, recordToolResult, startTurn } from "@ctxo/history/Recorder"
import { Effect, Schema } from "effect"
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

/** Proxy mode: the client's messages, oldest whole turns dropped until they fit. */
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
    return Effect.fail(
      new ContextTooLong({
        model: options.model,
        tokens,
        limit: options.limit,
        reason: "the system messages and the last turn alone do not fit"
      })
    )
  return Effect.succeed({ messages: [...lead, ...turns.flatMap((t) => t.messages)], dropped, tokens })
}

/**
 * Session mode: records what the client sent as new and compiles the session's context. Returns the
 * body to forward (the client's parameters with ctxo's messages) and the turn it belongs to.
 */
export const prepareSessionRequest = (options: {
  readonly sessionId: string
  readonly body: RawBody
  readonly idempotencyKey?: string
}) =>
  Effect.gen(function* () {
    const { sessionId: sid, body } = options
    const history = yield* HistoryStore
    const trailing: Array<Msg> = []
    for (let i = body.messages.length - 1; i >= 0 && body.messages[i]!.role === "tool"; i--)
      trailing.unshift(body.messages[i]!)
    let turn: number
    if (trailing.length > 0) {
      // Results of the tool calls the model made in this session's running turn.
      const doc = yield* history.load(sid)
      const calls = new Map<string, { turn: number; name: string }>()
      for (const m of doc.messages)
        for (const p of m.parts)
          if (p._tag === "tool-call") calls.set(p.callId, { turn: m.meta.turn, name: p.name })
      const answered = new Set(
        doc.messages.flatMap((m) => m.parts.flatMap((p) => (p._tag === "tool-result" ? [p.callId] : [])))
      )
      turn = 0
      for (const m of trailing) {
        const id = String(m.tool_call_id)
        const call = calls.get(id)
        if (call === undefined)
          return yield* new InvalidCompletionRequest({
            reason: `tool result ${id} answers no tool call of this session`
          })
        turn = call.turn
        if (answered.has(id)) continue
        const text = contentText(m.content)
        let data: unknown = text
        try {
          data = JSON.parse(text)
        } catch {
          data = text
        }
        yield* recordToolResult(sid, call.turn, { callId: id, name: call.name }, { status: "success", data })
      }
    } else {
      const user = [...body.messages].reverse().find((m) => m.role === "user")
      if (user === undefined)
        return yield* new InvalidCompletionRequest({ reason: "messages has no user message" })
      const began = yield* startTurn(sid, {
        input: contentText(user.content),
        ...(options.idempotencyKey === undefined ? {} : { inputKey: options.idempotencyKey })
      })
      turn = began.turn
      if (began.finished) {
        // A retry of a finished turn: its recorded answer, no model call.
        const doc = yield* history.load(sid)
        const final = doc.messages.find((m) => m.meta.turn === turn && m.meta.kind === "final")
        return { turn, answered: final === undefined ? "" : textOf(final) } as const
      }
    }
    const doc = yield* history.load(sid)
    const compiled = yield* compile({
      sessionId: sid,
      model: body.model,
      format: "openai",
      history: doc,
      query: ""
    })
    const { messages: _messages, metadata: _metadata, ...params } = body
    const forward: RawBody = {
      ...params,
      model: body.model,
      messages: (compiled.request as { messages: ReadonlyArray<Msg> }).messages
    }
    return { turn, forward, compiled } as const
  })

/** Records the model's answer: tool calls keep the turn going, text finishes it. */
export const recordAnswer = (options: {
  readonly sessionId: string
  readonly turn: number
  readonly content: string | null
  readonly toolCalls: ReadonlyArray<{
    readonly id: string
    readonly name: string
    readonly arguments: string
  }>
}) =>
  Effect.gen(function* () {
    if (options.toolCalls.length === 0) {
      yield* endTurn(options.sessionId, options.turn, options.content ?? "")
      return
    }
    for (const [i, call] of options.toolCalls.entries()) {
      let input: unknown
      try {
        input = JSON.parse(call.arguments === "" ? "{}" : call.arguments)
      } catch {
        input = { raw: call.arguments }
      }
      yield* recordStep(options.sessionId, options.turn, {
        ...(i === 0 && options.content ? { text: options.content } : {}),
        toolCall: { callId: call.id, name: call.name, input }
      })
    }
  })
