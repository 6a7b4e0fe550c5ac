import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { ChatEvent } from "@ctxo/agent/Agent"
import { type FakeUpstream, startFakeUpstream } from "@ctxo/agent/FakeUpstream"
import { foldHistoryText } from "@ctxo/store/HistoryJournal"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpServer from "@effect/platform/HttpServer"
import { Effect, Either, Layer, Logger, LogLevel, ManagedRuntime, Option, Stream } from "effect"
import { expect } from "vitest"
import * as GatewayConfig from "../src/GatewayConfig.ts"
import { app } from "../src/Server.ts"
import { layerTest } from "../src/ServerTest.ts"
import { exampleData } from "./spawned.ts"

export { exampleData }

const textIfAny = (file: string) => (existsSync(file) ? readFileSync(file, "utf8") : undefined)

/** Whether the session has a history on disk (messages.json, or its journal alone). */
export const hasHistory = (dataDir: string, sessionId: string) =>
  existsSync(join(dataDir, sessionId, "messages.json")) ||
  existsSync(join(dataDir, sessionId, "messages.journal"))

/**
 * A session's history as the gateway reads it from disk: messages.json with its journal folded in
 * (every acknowledged step is in one or the other). Throws when the session has none.
 */
export const historyText = (dataDir: string, sessionId: string): string => {
  const folded = foldHistoryText(
    textIfAny(join(dataDir, sessionId, "messages.json")),
    textIfAny(join(dataDir, sessionId, "messages.journal"))
  )
  if (Either.isLeft(folded)) throw new Error(`${sessionId}: ${JSON.stringify(folded.left)}`)
  if (folded.right === undefined) throw new Error(`${sessionId} has no history on disk`)
  return folded.right
}

/**
 * A gateway on a copy of the example data, talking to a fake upstream the test scripts. `close`
 * removes the copy (so does a failed start).
 */
export const startGateway = async (overrides: Partial<GatewayConfig.Settings> = {}) => {
  const dataDir = mkdtempSync(join(tmpdir(), "ctxo-gateway-"))
  const removeData = () => rmSync(dataDir, { recursive: true, force: true })
  try {
    return await started(dataDir, removeData, overrides)
  } catch (e) {
    removeData()
    throw e
  }
}

const started = async (
  dataDir: string,
  removeData: () => void,
  overrides: Partial<GatewayConfig.Settings>
) => {
  cpSync(exampleData, dataDir, { recursive: true })
  const upstream: FakeUpstream = await startFakeUpstream()
  const layer = app.pipe(
    Layer.provide(
      GatewayConfig.layerTest({ dataDir, upstreamBaseUrl: Option.some(upstream.url), ...overrides })
    ),
    Layer.provideMerge(layerTest),
    // Access logs of thousands of test requests drown the output: warnings only (CTXO_TEST_LOGS=1 for all).
    Layer.provide(
      Logger.minimumLogLevel(process.env.CTXO_TEST_LOGS === "1" ? LogLevel.All : LogLevel.Warning)
    )
  )
  const runtime = ManagedRuntime.make(layer)
  const address = (await runtime.runPromise(HttpServer.HttpServer)).address
  const baseUrl = address._tag === "TcpAddress" ? `http://127.0.0.1:${address.port}` : ""
  return {
    dataDir,
    upstream,
    /** Where the gateway listens, for clients that are not Effect's (the openai SDK, fetch). */
    baseUrl,
    run: <A, E>(effect: Effect.Effect<A, E, Layer.Layer.Success<typeof layer>>) => runtime.runPromise(effect),
    close: async () => {
      await runtime.dispose()
      await upstream.close()
      removeData()
    }
  }
}

export interface SseEvent {
  readonly event: string
  readonly data: ChatEvent
}

/** POSTs a chat message and reads the whole Server-Sent Events stream, as a client would. */
export const chatEvents = (sessionId: string, body: Record<string, unknown>) =>
  Effect.gen(function* () {
    const client = yield* HttpClient.HttpClient
    const response = yield* client.execute(
      HttpClientRequest.post(`/api/session/${sessionId}/chat`).pipe(HttpClientRequest.bodyUnsafeJson(body))
    )
    const text = yield* response.stream.pipe(Stream.decodeText(), Stream.mkString)
    const events = text
      .split("\n\n")
      .filter((frame) => frame.trim() !== "")
      .map((frame): SseEvent => {
        const event = /^event: (.*)$/m.exec(frame)?.[1] ?? ""
        const data = JSON.parse(/^data: (.*)$/m.exec(frame)?.[1] ?? "null") as ChatEvent
        return { event, data }
      })
    return { status: response.status, contentType: response.headers["content-type"], events }
  }).pipe(Effect.scoped)

/** Creates session `id` through the API (201, else the test fails with the answer) and returns it. */
export const createSession = async (gw: { readonly baseUrl: string }, id: string) => {
  const response = await fetch(`${gw.baseUrl}/api/sessions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ id, concept: `test ${id}` })
  })
  expect(response.status, await response.text()).toBe(201)
  return id
}

/** A JSON request as any client sends it: the status, the parsed body (when it is JSON) and the text. */
export const call = async (
  gw: { readonly baseUrl: string },
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {}
) => {
  const response = await fetch(`${gw.baseUrl}${path}`, {
    method,
    headers: { ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  // biome-ignore lint/suspicious/noExplicitAny: the tests read answers of many shapes
  let json: any
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: response.status, json, text, contentType: response.headers.get("content-type") }
}
