/**
 * The upstream model through the official openai SDK against any OpenAI-compatible base URL. With
 * no API key configured, the gateway starts the local fake upstream (`FakeUpstream`) and talks to
 * it the same way. `complete` streams one chat completion as events: text deltas, then the tool
 * calls and the usage when the stream ends.
 */

import { Context, Effect, Layer, Option, Redacted, Schema, Stream } from "effect"
import OpenAI from "openai"
import { startFakeUpstream } from "./FakeUpstream.ts"

export class UpstreamError extends Schema.TaggedError<UpstreamError>("@ctxo/gateway/UpstreamError")(
  "UpstreamError",
  {
    status: Schema.optional(Schema.Number),
    code: Schema.optional(Schema.String),
    reason: Schema.String
  }
) {
  override get message() {
    return `Upstream model failed${this.status === undefined ? "" : ` (${this.status})`}: ${this.reason}`
  }
}

export type CompletionEvent =
  | { readonly _tag: "TextDelta"; readonly text: string }
  | {
      readonly _tag: "Done"
      readonly text: string
      readonly toolCalls: ReadonlyArray<{
        readonly id: string
        readonly name: string
        readonly arguments: string
      }>
      readonly usage?: { readonly inputTokens: number; readonly outputTokens: number }
    }

/** A streamed completion chunk, as much of it as the accumulator reads. */
export interface Chunk {
  readonly usage?: { readonly prompt_tokens?: number; readonly completion_tokens?: number } | null
  readonly choices?: ReadonlyArray<{
    readonly delta?: {
      readonly content?: string | null
      readonly tool_calls?: ReadonlyArray<{
        readonly index: number
        readonly id?: string
        readonly function?: { readonly name?: string; readonly arguments?: string }
      }>
    }
  }>
}

/** Collects a streamed answer: its text, its tool calls (merged by index) and the usage. */
export const chunkAccumulator = () => {
  let text = ""
  const calls = new Map<number, { id: string; name: string; arguments: string }>()
  let usage: { inputTokens: number; outputTokens: number } | undefined
  return {
    /** Adds a chunk; returns its text ("" when it has none). */
    add: (chunk: Chunk): string => {
      if (chunk.usage)
        usage = {
          inputTokens: chunk.usage.prompt_tokens ?? 0,
          outputTokens: chunk.usage.completion_tokens ?? 0
        }
      const delta = chunk.choices?.[0]?.delta
      if (delta === undefined) return ""
      for (const call of delta.tool_calls ?? []) {
        const current = calls.get(call.index) ?? { id: "", name: "", arguments: "" }
        calls.set(call.index, {
          id: call.id ?? current.id,
          name: current.name + (call.function?.name ?? ""),
          arguments: current.arguments + (call.function?.arguments ?? "")
        })
      }
      const piece = typeof delta.content === "string" ? delta.content : ""
      text += piece
      return piece
    },
    result: () => ({
      text,
      toolCalls: [...calls.entries()].sort(([a], [b]) => a - b).map(([, c]) => c),
      usage
    })
  }
}

export interface CompletionRequest {
  readonly model: string
  readonly messages: ReadonlyArray<Record<string, unknown>>
  readonly tools?: ReadonlyArray<Record<string, unknown>>
}

export interface Service {
  /** Where requests go (for /readyz and logs). */
  readonly upstream: string
  readonly complete: (request: CompletionRequest) => Stream.Stream<CompletionEvent, UpstreamError>
  /** The client's request body as is: the completion (JSON), or its chunks when streaming. */
  readonly passthrough: (body: RawBody) => Effect.Effect<unknown, UpstreamError>
  readonly passthroughStream: (body: RawBody) => Stream.Stream<Record<string, unknown>, UpstreamError>
}

export class ModelClient extends Context.Tag("@ctxo/gateway/ModelClient")<ModelClient, Service>() {}

const toUpstreamError = (e: unknown) =>
  e instanceof OpenAI.APIError
    ? new UpstreamError({
        ...(e.status === undefined ? {} : { status: e.status }),
        ...(typeof e.code === "string" ? { code: e.code } : {}),
        reason: e.message
      })
    : new UpstreamError({ reason: e instanceof Error ? e.message : String(e) })

export const make = (client: OpenAI, upstream: string, timeoutMs: number): Service => {
  /** One streaming completion as its chunks; closing the stream aborts the request. */
  const chunksOf = (body: RawBody) =>
    Stream.unwrapScoped(
      Effect.gen(function* () {
        const controller = yield* Effect.acquireRelease(
          Effect.sync(() => new AbortController()),
          (c) => Effect.sync(() => c.abort())
        )
        const stream = yield* Effect.tryPromise({
          try: () =>
            client.chat.completions.create(
              {
                ...(body as unknown as OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming),
                stream: true
              },
              { signal: controller.signal, timeout: timeoutMs, maxRetries: 0 }
            ),
          catch: toUpstreamError
        })
        return Stream.fromAsyncIterable(stream, toUpstreamError)
      })
    )
  return {
    upstream,
    passthrough: (body) =>
      Effect.tryPromise({
        try: (signal) =>
          client.chat.completions.create(
            {
              ...(body as unknown as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming),
              stream: false
            },
            { signal, timeout: timeoutMs, maxRetries: 0 }
          ),
        catch: toUpstreamError
      }),
    passthroughStream: (body) =>
      chunksOf(body).pipe(Stream.map((chunk) => chunk as unknown as Record<string, unknown>)),
    complete: (request) =>
      Stream.unwrap(
        Effect.sync(() => {
          const stream = chunksOf({
            model: request.model,
            messages: request.messages,
            ...(request.tools === undefined || request.tools.length === 0 ? {} : { tools: request.tools }),
            stream_options: { include_usage: true }
          })
          const acc = chunkAccumulator()
          const deltas = stream.pipe(
            Stream.timeoutFail(
              () => new UpstreamError({ reason: `no data for ${timeoutMs} ms` }),
              `${timeoutMs} millis`
            ),
            Stream.mapConcat((chunk): ReadonlyArray<CompletionEvent> => {
              const text = acc.add(chunk)
              return text === "" ? [] : [{ _tag: "TextDelta", text }]
            })
          )
          return Stream.concat<CompletionEvent, UpstreamError, never, CompletionEvent, never, never>(
            deltas,
            Stream.suspend(() => {
              const { text, toolCalls, usage } = acc.result()
              const done: CompletionEvent = {
                _tag: "Done",
                text,
                toolCalls,
                ...(usage === undefined ? {} : { usage })
              }
              return Stream.succeed(done)
            })
          )
        })
      )
  }
}

export interface UpstreamOptions {
  readonly apiKey: Option.Option<Redacted.Redacted<string>>
  /** Default with a key: https://api.openai.com/v1. */
  readonly baseUrl: Option.Option<string>
  readonly timeoutMs: number
}

/**
 * The configured upstream: with a key, that API (OpenAI by default); with only a base URL, that
 * key-less API; with neither, the local fake one, started and stopped with the layer.
 */
export const layer = (options: UpstreamOptions): Layer.Layer<ModelClient> =>
  Layer.scoped(
    ModelClient,
    Effect.gen(function* () {
      if (Option.isSome(options.apiKey)) {
        const baseURL = Option.getOrElse(options.baseUrl, () => "https://api.openai.com/v1")
        return make(
          new OpenAI({ apiKey: Redacted.value(options.apiKey.value), baseURL }),
          baseURL,
          options.timeoutMs
        )
      }
      if (Option.isSome(options.baseUrl)) {
        const baseURL = options.baseUrl.value
        return make(new OpenAI({ apiKey: "none", baseURL }), baseURL, options.timeoutMs)
      }
      const fake = yield* Effect.acquireRelease(
        Effect.promise(() => startFakeUpstream()),
        (f) => Effect.promise(() => f.close())
      )
      yield* Effect.logInfo(
        `No upstream API key: answering with the local deterministic model at ${fake.url}`
      )
      return make(
        new OpenAI({ apiKey: "local", baseURL: fake.url }),
        `local (${fake.url})`,
        options.timeoutMs
      )
    })
  )

/** A chat completion request passed through as the client sent it (tools, temperature, ...). */
export type RawBody = Readonly<Record<string, unknown>> & {
  readonly model: string
  readonly messages: ReadonlyArray<Record<string, unknown>>
}
