/**
 * A small OpenAI-compatible server (`POST /v1/chat/completions`, streaming and not; `GET /v1/models`)
 * for tests and local development. It records every request it gets, answers from a script of
 * replies when one is queued, and otherwise with a deterministic local reply, so the gateway
 * works offline with no API key: the same code path (the official openai SDK) as a real provider.
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
  | { readonly type: "error"; readonly status: number; readonly code?: string; readonly message?: string }
  /** Never answers (a timeout). */
  | { readonly type: "hang" }
  /** Starts streaming, then drops the connection (a broken stream). */
  | { readonly type: "break"; readonly text?: string }

export interface Usage {
  readonly prompt_tokens: number
  readonly completion_tokens: number
}

export interface RecordedRequest {
  readonly path: string
  readonly headers: Readonly<Record<string, string | undefined>>
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
  readonly requests: Array<RecordedRequest>
  /** Queue replies; each request takes the next one (then the default reply). */
  readonly script: (...replies: ReadonlyArray<Reply>) => void
  readonly close: () => Promise<void>
}

const approxTokens = (messages: ReadonlyArray<Record<string, unknown>>) =>
  Math.ceil(JSON.stringify(messages).length / 4)

/** The reply when nothing is scripted: deterministic, and says what it saw. */
export const localReply = (body: RecordedRequest["body"]): Reply => {
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

export const startFakeUpstream = async (options: { readonly port?: number; readonly host?: string } = {}) => {
  const requests: Array<RecordedRequest> = []
  const queue: Array<Reply> = []
  let counter = 0
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Array<Buffer> = []
    for await (const c of req) chunks.push(c as Buffer)
    if (req.method === "GET" && req.url?.endsWith("/models"))
      return send(res, 200, { object: "list", data: [{ id: "local", object: "model", owned_by: "ctxo" }] })
    if (req.method !== "POST" || !req.url?.endsWith("/chat/completions"))
      return send(res, 404, { error: { message: "not found" } })
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as RecordedRequest["body"]
    requests.push({ path: req.url, headers: req.headers as Record<string, string | undefined>, body })
    const reply = queue.shift() ?? localReply(body)
    const id = `chatcmpl-${++counter}`
    const usage: Usage = ("usage" in reply ? reply.usage : undefined) ?? {
      prompt_tokens: approxTokens(body.messages),
      completion_tokens: 20
    }
    if (reply.type === "hang") return
    if (reply.type === "error")
      return send(res, reply.status, {
        error: {
          message: reply.message ?? `upstream error ${reply.status}`,
          type: "upstream_error",
          code: reply.code ?? null
        }
      })
    const calls = reply.type === "tool_calls" ? reply.calls : []
    const text = reply.type === "break" ? (reply.text ?? "partial") : (reply.text ?? "")
    if (body.stream !== true) {
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
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  } satisfies FakeUpstream
}
