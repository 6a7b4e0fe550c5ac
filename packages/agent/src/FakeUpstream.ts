/**
 * A small OpenAI-compatible server (`POST /v1/chat/completions`, streaming and not; `GET /v1/models`)
 * for tests and local development. It records every request it gets, answers from a script of
 * replies when one is queued, and otherwise with a deterministic local reply, so the gateway
 * works offline with no API key: the same code path (the official openai SDK) as a real provider.
 * Scripted faults cover what an upstream does wrong: errors (with `Retry-After`), hangs, stalls
 * after the headers or after one chunk, empty or malformed bodies, plain JSON where a stream was
 * asked for, and broken streams.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

export type Reply =
  | { readonly type: "text"; readonly text: string; readonly usage?: Usage }
  | {
      readonly type: "tool_calls"
      readonly text?: string
      readonly calls: ReadonlyArray<{
        readonly id: string
        readonly name: string
        readonly arguments: unknown
      }>
      readonly usage?: Usage
    }
  /** An HTTP error from upstream (e.g. 500, 429, or 400 with code context_length_exceeded). */
  | {
      readonly type: "error"
      readonly status: number
      readonly code?: string
      readonly message?: string
      /** The error's `type` (default as OpenAI: `tokens` for 429, `server_error` for 5xx, else `invalid_request_error`). */
      readonly errorType?: string
      readonly param?: string
      /** Sent as the `Retry-After` header (e.g. with 429). */
      readonly retryAfter?: string
      /** More headers (e.g. `x-ratelimit-remaining-requests`). */
      readonly headers?: Readonly<Record<string, string>>
    }
  /** Never answers (a timeout). */
  | { readonly type: "hang" }
  /**
   * Answers 200, then sends nothing more: right after the headers, or after one chunk (a stream's
   * first text chunk, or the start of a JSON body).
   */
  | { readonly type: "stall"; readonly after: "headers" | "chunk" }
  /** 200 with an empty body. */
  | { readonly type: "empty" }
  /** 200 with a whole JSON completion, also on a streaming call (no Server-Sent Events). */
  | { readonly type: "not-sse"; readonly text?: string }
  /** 200 with JSON cut short (a stream: one event of cut JSON, then the end). */
  | { readonly type: "malformed" }
  /** Starts streaming (or a JSON body), then drops the connection (a broken stream). */
  | { readonly type: "break"; readonly text?: string }

export interface Usage {
  readonly prompt_tokens: number
  readonly completion_tokens: number
}

export interface RecordedRequest {
  readonly path: string
  readonly headers: Readonly<Record<string, string | undefined>>
  /** The body as it came, before it was parsed into `body`. */
  readonly text: string
  readonly body: {
    readonly model: string
    readonly messages: ReadonlyArray<Record<string, unknown>>
    readonly stream?: boolean
    readonly tools?: ReadonlyArray<unknown>
    readonly [key: string]: unknown
  }
}

export interface FakeUpstream {
  readonly url: string
  /** Every request received, in order (none, and no error, when started with `keepRequests: false`). */
  readonly requests: Array<RecordedRequest>
  /** Queue replies; each request takes the next one (then the default reply). */
  readonly script: (...replies: ReadonlyArray<Reply>) => void
  /** Requests whose answer has not ended and whose connection is still open. */
  readonly inFlight: () => number
  readonly close: () => Promise<void>
}

const approxTokens = (messages: ReadonlyArray<Record<string, unknown>>) =>
  Math.ceil(JSON.stringify(messages).length / 4)

/** The names of the function tools a request offers. */
const offeredTools = (body: RecordedRequest["body"]) =>
  new Set(
    (body.tools ?? []).flatMap((t) => {
      const name = (t as { function?: { name?: unknown } } | null)?.function?.name
      return typeof name === "string" ? [name] : []
    })
  )

const textOfContent = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
      ? content.map((p) => (typeof p?.text === "string" ? p.text : "")).join("\n")
      : ""

const RUN_ROLE = /\[ctxo run: (judge|plan|replan|reflect|answer)\]/

/** A goal's parts: its lines, sentences, `;`-separated clauses and `..., then ...` steps (at most 5). */
export const goalParts = (goal: string): ReadonlyArray<string> =>
  goal
    .split(/\n+|;\s*|\.\s+(?=\p{Lu})|,?\s+(?:and\s+)?then\s+/u)
    .map((p) =>
      p
        .replace(/^\s*(?:\d+[.)]|[-*])\s*/, "")
        .replace(/[.\s]+$/, "")
        .trim()
    )
    .filter((p) => p !== "")
    .slice(0, 5)

/**
 * The local model's answer to a plan-execute-reflect run's own questions (`@ctxo/agent/Orchestrator`,
 * recognised by the `[ctxo run: ROLE]` line of its meta context), so a run works offline: a goal of
 * several parts is complex and planned one step a part, each after the one before; the reflection
 * finishes; the answer quotes each result's first line.
 */
export const localRunReply = (body: RecordedRequest["body"]): Reply | undefined => {
  const system = body.messages
    .filter((m) => m.role === "system")
    .map((m) => textOfContent(m.content))
    .join("\n")
  const role = RUN_ROLE.exec(system)?.[1]
  if (role === undefined) return undefined
  const goal = /^Goal: (.*)$/m.exec(system)?.[1] ?? ""
  const parts = goalParts(goal)
  const json = (value: unknown): Reply => ({ type: "text", text: JSON.stringify(value) })
  switch (role) {
    case "judge":
      return json(
        parts.length > 1
          ? { complexity: "complex", reason: `the goal has ${parts.length} parts` }
          : { complexity: "simple", reason: "the goal is one question" }
      )
    case "plan":
    case "replan":
      return json({
        steps: (parts.length === 0 ? [goal] : parts).map((p, i) => ({
          id: `s${i + 1}`,
          title: p.slice(0, 80),
          instruction: p,
          dependsOn: i === 0 ? [] : [`s${i}`]
        })),
        rationale: "one step for each part of the goal, in order"
      })
    case "reflect": {
      const results = [...system.matchAll(/^### Result of /gm)].length
      return json({ decision: "finish", feedback: `${results} results are in; they cover the goal.` })
    }
    default: {
      const results = [...system.matchAll(/^### Result of (\S+)[^\n]*\n([^\n]*)/gm)]
      return {
        type: "text",
        text:
          results.length === 0
            ? `(local model, no API key set) A direct answer to: ${goal}`
            : [
                `(local model, no API key set) From ${results.length} results:`,
                ...results.map((r) => `- ${r[1]}: ${r[2]!.slice(0, 160)}`)
              ].join("\n")
      }
    }
  }
}

/** The last message that is not a system one (a context compiler may put reminders after the input). */
const lastTurnMessage = (body: RecordedRequest["body"]) =>
  [...body.messages].reverse().find((m) => m.role !== "system" && m.role !== "developer")

const CALL_RULE = /(?:^|\s)call ([A-Za-z_][\w.-]*)(?:\s+(\{[\s\S]*\}))?/

/**
 * The tool call a request asks for by the scripted rule: its last message (system ones aside) is a
 * user message that says `call NAME {json arguments}` and NAME is one of the tools the request offers.
 */
export const ruleCall = (
  body: RecordedRequest["body"],
  id: string
): { readonly id: string; readonly name: string; readonly arguments: unknown } | undefined => {
  const last = lastTurnMessage(body)
  if (last?.role !== "user") return undefined
  const m = CALL_RULE.exec(textOfContent(last.content))
  if (m === null || !offeredTools(body).has(m[1]!)) return undefined
  let args: unknown = {}
  if (m[2] !== undefined)
    try {
      args = JSON.parse(m[2])
    } catch {
      args = { raw: m[2] }
    }
  return { id, name: m[1]!, arguments: args }
}

/**
 * The reply when nothing is scripted: deterministic, and says what it saw. The one rule: a last
 * user message saying `call NAME {arguments}`, NAME a tool the request offers, is answered with
 * that tool call; once the tool's result is in (the last message a tool message), with text.
 */
export const localReply = (body: RecordedRequest["body"], callId = "call_local_1"): Reply => {
  const asked = localRunReply(body)
  if (asked !== undefined) return asked
  const call = ruleCall(body, callId)
  if (call !== undefined) return { type: "tool_calls", calls: [call] }
  const last = lastTurnMessage(body)
  if (last?.role === "tool") {
    const content = typeof last.content === "string" ? last.content : JSON.stringify(last.content)
    return {
      type: "text",
      text: `(local model, no API key set) The tool answered: ${content.replace(/\s+/g, " ").slice(0, 200)}`
    }
  }
  const lastUser = [...body.messages].reverse().find((m) => m.role === "user")
  const text = typeof lastUser?.content === "string" ? lastUser.content.split("\n")[0]!.slice(0, 200) : ""
  return {
    type: "text",
    text: `(local model, no API key set) I received ${body.messages.length} messages, about ${approxTokens(body.messages)} tokens of context. You said: ${text}`
  }
}

const send = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" })
  res.end(JSON.stringify(body))
}

const chunk = (
  id: string,
  model: string,
  delta: Record<string, unknown>,
  finish: string | null,
  usage?: Usage
) =>
  `data: ${JSON.stringify({
    id,
    object: "chat.completion.chunk",
    created: 0,
    model,
    choices: [{ index: 0, delta, finish_reason: finish }],
    ...(usage === undefined
      ? {}
      : { usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } })
  })}\n\n`

export const startFakeUpstream = async (
  options: {
    readonly port?: number
    readonly host?: string
    /** Called with each request as it arrives (an eval writes them where its assertions read). */
    readonly onRequest?: (request: RecordedRequest) => void
    /** Replies answered in order before the default ones (a script file's, `CTXO_LOCAL_MODEL_SCRIPT`). */
    readonly script?: ReadonlyArray<Reply>
    /**
     * Whether `requests` keeps every request received (default: a test reads them). The gateway's
     * local model, the benchmark's upstream and the eval's (which writes them out through
     * `onRequest`, called either way) keep none: each is a request's text and parsed body, a whole
     * session's history for a session's turn, kept for as long as the process runs.
     */
    readonly keepRequests?: boolean
  } = {}
) => {
  const keep = options.keepRequests ?? true
  const requests: Array<RecordedRequest> = []
  const queue: Array<Reply> = [...(options.script ?? [])]
  let counter = 0
  let open = 0
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Array<Buffer> = []
    for await (const c of req) chunks.push(c as Buffer)
    if (req.method === "GET" && req.url?.endsWith("/models"))
      return send(res, 200, { object: "list", data: [{ id: "local", object: "model", owned_by: "ctxo" }] })
    if (req.method !== "POST" || !req.url?.endsWith("/chat/completions"))
      return send(res, 404, { error: { message: "not found" } })
    const sentText = Buffer.concat(chunks).toString("utf8")
    const body = JSON.parse(sentText) as RecordedRequest["body"]
    const recorded = {
      path: req.url,
      headers: req.headers as Record<string, string | undefined>,
      text: sentText,
      body
    }
    if (keep) requests.push(recorded)
    options.onRequest?.(recorded)
    const id = `chatcmpl-${++counter}`
    const reply = queue.shift() ?? localReply(body, `call_${id}`)
    const usage: Usage = ("usage" in reply ? reply.usage : undefined) ?? {
      prompt_tokens: approxTokens(body.messages),
      completion_tokens: 20
    }
    if (reply.type === "hang") return
    if (reply.type === "error") {
      if (reply.retryAfter !== undefined) res.setHeader("retry-after", reply.retryAfter)
      for (const [name, value] of Object.entries(reply.headers ?? {})) res.setHeader(name, value)
      return send(res, reply.status, {
        error: {
          message: reply.message ?? `upstream error ${reply.status}`,
          type:
            reply.errorType ??
            (reply.status === 429
              ? "tokens"
              : reply.status >= 500
                ? "server_error"
                : "invalid_request_error"),
          param: reply.param ?? null,
          code: reply.code ?? (reply.status === 429 ? "rate_limit_exceeded" : null)
        }
      })
    }
    const streaming = body.stream === true
    if (reply.type === "stall") {
      res.writeHead(200, { "content-type": streaming ? "text/event-stream" : "application/json" })
      if (reply.after === "headers") res.flushHeaders()
      else if (streaming) {
        res.write(chunk(id, body.model, { role: "assistant", content: "" }, null))
        res.write(chunk(id, body.model, { content: "Half an ans" }, null))
      } else res.write(`{"id":"${id}","object":"chat.completion","choices":[`)
      return
    }
    if (reply.type === "empty") {
      res.writeHead(200, { "content-type": streaming ? "text/event-stream" : "application/json" })
      return res.end()
    }
    if (reply.type === "malformed") {
      res.writeHead(200, { "content-type": streaming ? "text/event-stream" : "application/json" })
      return res.end(
        streaming ? `data: {"id":"${id}","choices":[{"delta":\n\n` : `{"id":"${id}","choices":[{"mess`
      )
    }
    const calls = reply.type === "tool_calls" ? reply.calls : []
    const text = reply.type === "break" ? (reply.text ?? "partial") : (reply.text ?? "")
    if (!streaming && reply.type === "break") {
      res.writeHead(200, { "content-type": "application/json" })
      res.write(
        `{"id":"${id}","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"${text}`
      )
      res.socket?.destroy()
      return
    }
    if (!streaming || reply.type === "not-sse") {
      return send(res, 200, {
        id,
        object: "chat.completion",
        created: 0,
        model: body.model,
        choices: [
          {
            index: 0,
            finish_reason: calls.length > 0 ? "tool_calls" : "stop",
            message: {
              role: "assistant",
              content: text === "" && calls.length > 0 ? null : text,
              ...(calls.length === 0
                ? {}
                : {
                    tool_calls: calls.map((c) => ({
                      id: c.id,
                      type: "function",
                      function: { name: c.name, arguments: JSON.stringify(c.arguments) }
                    }))
                  })
            }
          }
        ],
        usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens }
      })
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
    res.write(chunk(id, body.model, { role: "assistant", content: "" }, null))
    // Text in a few pieces, as a model streams it.
    const pieces = text.match(/.{1,24}/gs) ?? []
    for (const piece of pieces) res.write(chunk(id, body.model, { content: piece }, null))
    if (reply.type === "break") {
      res.socket?.destroy()
      return
    }
    for (const [index, c] of calls.entries())
      res.write(
        chunk(
          id,
          body.model,
          {
            tool_calls: [
              {
                index,
                id: c.id,
                type: "function",
                function: { name: c.name, arguments: JSON.stringify(c.arguments) }
              }
            ]
          },
          null
        )
      )
    res.write(chunk(id, body.model, {}, calls.length > 0 ? "tool_calls" : "stop"))
    const streamOptions = body.stream_options as { include_usage?: boolean } | undefined
    if (streamOptions?.include_usage === true)
      res.write(
        `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 0, model: body.model, choices: [], usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } })}\n\n`
      )
    res.end("data: [DONE]\n\n")
  }
  const server: Server = createServer((req, res) => {
    open++
    res.once("close", () => {
      open--
    })
    handle(req, res).catch((e) => send(res, 500, { error: { message: String(e) } }))
  })
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, options.host ?? "127.0.0.1", resolve))
  const address = server.address() as AddressInfo
  return {
    url: `http://${address.address}:${address.port}/v1`,
    requests,
    script: (...replies) => {
      queue.push(...replies)
    },
    inFlight: () => open,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  } satisfies FakeUpstream
}

/**
 * A script file of replies (`CTXO_LOCAL_MODEL_SCRIPT`): a JSON array of replies, or `{ "replies":
 * [...] }`, each as `Reply` above, e.g. `{ "type": "tool_calls", "calls": [{ "id": "call_1",
 * "name": "read_file", "arguments": { "path": "notes.md" } }] }` or `{ "type": "text", "text": "Done." }`.
 * Answered in order, then the default replies. An error names the file and what is wrong.
 */
export const parseScript = (text: string, origin: string): ReadonlyArray<Reply> => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (e) {
    throw new Error(`${origin} is not JSON: ${(e as Error).message}`)
  }
  const replies = Array.isArray(parsed) ? parsed : (parsed as { replies?: unknown } | null)?.replies
  if (!Array.isArray(replies))
    throw new Error(`${origin} is neither an array of replies nor { "replies": [...] }`)
  const types = new Set([
    "text",
    "tool_calls",
    "error",
    "hang",
    "stall",
    "empty",
    "not-sse",
    "malformed",
    "break"
  ])
  replies.forEach((r, i) => {
    const type = (r as { type?: unknown } | null)?.type
    if (typeof type !== "string" || !types.has(type))
      throw new Error(`${origin}: replies[${i}].type must be one of ${[...types].join(", ")}`)
  })
  return replies as ReadonlyArray<Reply>
}
