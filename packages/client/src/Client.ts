/**
 * A typed client of the ctxo gateway, generated from the HTTP contract (`@ctxo/api/Api`) by
 * `HttpApiClient`: every endpoint is `client.<group>.<endpoint>({ path, urlParams, payload,
 * headers })`, its answer decoded with the contract's schemas and its errors the contract's (a
 * `NotFound`, `Conflict`, ... with the gateway's `tag`, `message` and `details`).
 *
 * It runs on `fetch` (`FetchHttpClient`), so the same code works in Node (20.19+) and in a
 * browser; nothing here imports Node's modules.
 *
 * - Effect programs: `make({ baseUrl, apiKey })` needs an `HttpClient` (`FetchHttpClient.layer`).
 * - Everyone else: `connect({ baseUrl, apiKey })` gives the same endpoints as functions returning
 *   promises (rejected with the typed error), plus `chat` (`./Chat.ts`) and `dispose`.
 */
import { Api } from "@ctxo/api/Api"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type { HttpClientResponse } from "@effect/platform/HttpClientResponse"
import { Cause, Effect, Exit, ManagedRuntime } from "effect"

export interface ClientOptions {
  /** Where the gateway is (`http://127.0.0.1:8787`); in a page served by the gateway, `location.origin`. */
  readonly baseUrl: string
  /** An API key (sent as `Authorization: Bearer`), when the gateway has keys configured. */
  readonly apiKey?: string | undefined
}

/** The fetch client with the key on every request. */
export const httpClient = (options: ClientOptions) =>
  Effect.map(HttpClient.HttpClient, (client) =>
    options.apiKey === undefined || options.apiKey === ""
      ? client
      : HttpClient.mapRequest(client, HttpClientRequest.bearerToken(options.apiKey))
  )

/** The contract's client (Effect): `yield* make(options)` then `client.sessions.list()`. */
export const make = (options: ClientOptions) =>
  Effect.flatMap(httpClient(options), (client) =>
    HttpApiClient.makeWith(Api, { httpClient: client, baseUrl: options.baseUrl })
  )

export type ApiClient = Effect.Effect.Success<ReturnType<typeof make>>

/** The HTTP client every request here runs on: `fetch`, in Node and in browsers. */
export const layer = FetchHttpClient.layer

/** Each endpoint of a client as a function returning a promise of its answer (not `withResponse`). */
export type Promised<C> = {
  readonly [G in keyof C]: {
    readonly [E in keyof C[G]]: C[G][E] extends (
      ...args: infer A
    ) => Effect.Effect<infer S, infer _E, infer _R>
      ? (...args: A) => Promise<Exclude<S, readonly [unknown, HttpClientResponse]>>
      : never
  }
}

/** The error a failed effect failed with (not wrapped), for a promise to reject with. */
export const runToPromise = <A, E>(
  runtime: ManagedRuntime.ManagedRuntime<HttpClient.HttpClient, never>,
  effect: Effect.Effect<A, E, HttpClient.HttpClient>,
  signal?: AbortSignal
): Promise<A> =>
  runtime.runPromiseExit(effect, signal === undefined ? {} : { signal }).then((exit) => {
    if (Exit.isSuccess(exit)) return exit.value
    throw Cause.squash(exit.cause)
  })

export interface Connection {
  readonly options: ClientOptions
  /** Every endpoint of the contract, as promises: `await api.sessions.list()`. */
  readonly api: Promised<ApiClient>
  /** Runs an effect that needs the HTTP client (the chat stream, your own programs). */
  readonly run: <A, E>(effect: Effect.Effect<A, E, HttpClient.HttpClient>, signal?: AbortSignal) => Promise<A>
  /** Frees the runtime. */
  readonly dispose: () => Promise<void>
}

/** A client for code that is not written with Effect: the contract's endpoints as promises. */
export const connect = (options: ClientOptions): Connection => {
  const runtime = ManagedRuntime.make(layer)
  const client = runtime.runSync(make(options)) as unknown as Record<string, Record<string, unknown>>
  const run = <A, E>(effect: Effect.Effect<A, E, HttpClient.HttpClient>, signal?: AbortSignal) =>
    runToPromise(runtime, effect, signal)
  const api: Record<string, Record<string, unknown>> = {}
  for (const [group, endpoints] of Object.entries(client)) {
    const promised: Record<string, unknown> = {}
    for (const [name, endpoint] of Object.entries(endpoints))
      promised[name] = (...args: ReadonlyArray<unknown>) =>
        run((endpoint as (...a: ReadonlyArray<unknown>) => Effect.Effect<unknown, unknown, never>)(...args))
    api[group] = promised
  }
  return { options, api: api as unknown as Promised<ApiClient>, run, dispose: () => runtime.dispose() }
}

/**
 * One sentence for a person from whatever a call failed with: the gateway's error (`tag: message`),
 * a gateway that did not answer, or an answer that is not what the contract says.
 */
export const describeError = (error: unknown): string => {
  if (typeof error === "object" && error !== null) {
    const e = error as { _tag?: unknown; tag?: unknown; message?: unknown; reason?: unknown }
    if (typeof e.tag === "string" && typeof e.message === "string") return `${e.tag}: ${e.message}`
    if (e._tag === "RequestError") return `The gateway did not answer: ${String(e.message ?? e.reason)}`
    if (e._tag === "ResponseError")
      return `The gateway's answer could not be read: ${String(e.message ?? e.reason)}`
    if (e._tag === "ParseError")
      return `The gateway's answer is not what the contract says: ${String(e.message)}`
    if (typeof e.message === "string") return e.message
  }
  return String(error)
}
