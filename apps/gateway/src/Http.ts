/**
 * The handlers of the HTTP contract (`@ctxo/api`): each maps its domain errors onto the wire errors
 * (`{ error: { tag, message, details } }`, the status from `ErrorMapping`) and nothing else.
 */

import { chat, sseFrame } from "@ctxo/agent/Agent"
import { Controller } from "@ctxo/agent/Controller"
import { ModelClient } from "@ctxo/agent/ModelClient"
import { agentTools } from "@ctxo/agent/Tools"
import { TurnEngine } from "@ctxo/agent/TurnEngine"
import { Api, type BlockNode, ChatRequest } from "@ctxo/api/Api"
import { Unprocessable } from "@ctxo/api/ApiErrors"
import type { Block } from "@ctxo/blocks/Block"
import { parseJsonBlocks } from "@ctxo/blocks/JsonBlocks"
import { parseMarkdownBlocks } from "@ctxo/blocks/MarkdownBlocks"
import { parseManifest } from "@ctxo/compiler/Manifest"
import { HistoryStore } from "@ctxo/history/HistoryStore"
import { toRecordedSession } from "@ctxo/replay/Record"
import { type SessionRecord, Store } from "@ctxo/store/Store"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Deferred, Effect, Either, FiberRef, Layer, Stream } from "effect"
import { AggregateLive } from "./AggregateHttp.ts"
import { toApiError, toPreview } from "./ErrorMapping.ts"
import { decodeBody, eventStreamResponse } from "./EventStream.ts"
import { GatewayConfig } from "./GatewayConfig.ts"
import { HistoryLive, previousRequest } from "./HistoryHttp.ts"
import { MapLive } from "./MapHttp.ts"
import { MemoryLive } from "./MemoryHttp.ts"
import * as Metrics from "./Metrics.ts"
import { OpenAILive } from "./OpenAIHttp.ts"
import { ifMatch } from "./RequestBody.ts"
import { RunsLive } from "./RunsHttp.ts"
import { Shutdown } from "./Shutdown.ts"
import { CallerIsAdmin, CurrentTenant, Tenancy } from "./Tenancy.ts"

const wire = Effect.mapError(toApiError)

const blockNode = (b: Block): BlockNode => ({
  id: b.id,
  heading: b.heading,
  level: b.level,
  startLine: b.source.startLine,
  endLine: b.source.endLine,
  children: b.children.map(blockNode)
})
const blocksOf = (path: string, content: string) =>
  path.toLowerCase().endsWith(".json")
    ? Either.match(parseJsonBlocks(content, path), {
        onLeft: (e) => Effect.fail(toApiError(e)),
        onRight: (blocks) => Effect.succeed(blocks.map(blockNode))
      })
    : Effect.succeed(parseMarkdownBlocks(content, path).map(blockNode))

export const HealthLive = HttpApiBuilder.group(Api, "health", (handlers) =>
  handlers
    .handle("healthz", () => Effect.succeed({ status: "ok" as const, version: "0.1.0" }))
    .handle("readyz", () =>
      Effect.gen(function* () {
        const config = yield* GatewayConfig
        const store = yield* Store
        const client = yield* ModelClient
        yield* store.listSessions.pipe(wire)
        // Where the data and the upstream are is for the admin key only.
        const admin = yield* FiberRef.get(CallerIsAdmin)
        return {
          status: "ready" as const,
          model: config.model,
          ...(admin ? { dataDir: store.root, upstream: client.upstream } : {})
        }
      })
    )
)

export const SessionsLive = HttpApiBuilder.group(Api, "sessions", (handlers) =>
  handlers
    .handle("list", () => Effect.flatMap(Store, (s) => s.listSessions).pipe(wire))
    .handle("create", ({ payload }) =>
      Effect.flatMap(Store, (s) =>
        s.createSession({
          concept: payload.concept,
          ...(payload.id === undefined ? {} : { id: payload.id }),
          ...(payload.metadata === undefined ? {} : { metadata: payload.metadata })
        })
      ).pipe(wire)
    )
    .handle("get", ({ path }) => Effect.flatMap(Store, (s) => s.getSession(path.id)).pipe(wire))
    .handle("delete", ({ path }) => Effect.flatMap(Store, (s) => s.deleteSession(path.id)).pipe(wire))
    .handle("update", ({ path, payload }) =>
      Effect.flatMap(Controller, (c) =>
        c.update(path.id, {
          ...(payload.concept === undefined ? {} : { concept: payload.concept }),
          ...(payload.metadata === undefined ? {} : { metadata: payload.metadata })
        })
      ).pipe(wire)
    )
    .handle("pause", ({ path }) => Effect.flatMap(Controller, (c) => c.pause(path.id)).pipe(sessionOf, wire))
    .handle("resume", ({ path }) =>
      Effect.flatMap(Controller, (c) => c.resume(path.id)).pipe(sessionOf, wire)
    )
    .handle("end", ({ path }) => Effect.flatMap(Controller, (c) => c.end(path.id)).pipe(sessionOf, wire))
)

const sessionOf = Effect.map((t: { readonly session: SessionRecord }) => t.session)

export const TasksLive = HttpApiBuilder.group(Api, "tasks", (handlers) =>
  handlers
    .handle("list", ({ path }) => Effect.flatMap(Controller, (c) => c.tasks(path.id)).pipe(wire))
    .handle("create", ({ path, payload }) =>
      Effect.flatMap(Controller, (c) =>
        c.addTask(path.id, {
          title: payload.title,
          ...(payload.description === undefined ? {} : { description: payload.description })
        })
      ).pipe(wire)
    )
    .handle("update", ({ path, payload }) =>
      Effect.flatMap(Controller, (c) =>
        c.updateTask(path.id, path.taskId, {
          ...(payload.status === undefined ? {} : { status: payload.status }),
          ...(payload.title === undefined ? {} : { title: payload.title }),
          ...(payload.description === undefined ? {} : { description: payload.description })
        })
      ).pipe(wire)
    )
    .handle("distribute", ({ payload, headers }) =>
      Effect.flatMap(Controller, (c) => {
        const key = headers["idempotency-key"]
        const { task, filter } = payload
        return c.distribute(
          {
            task: {
              title: task.title,
              ...(task.description === undefined ? {} : { description: task.description })
            },
            mode: payload.mode,
            ...(payload.sessions === undefined ? {} : { sessions: payload.sessions }),
            ...(filter === undefined
              ? {}
              : {
                  filter: {
                    ...(filter.metadata === undefined ? {} : { metadata: filter.metadata }),
                    ...(filter.concept === undefined ? {} : { concept: filter.concept })
                  }
                }),
            ...(payload.fromSession === undefined ? {} : { fromSession: payload.fromSession })
          },
          key === undefined ? {} : { idempotencyKey: key }
        )
      }).pipe(wire)
    )
)

export const FilesLive = HttpApiBuilder.group(Api, "files", (handlers) =>
  handlers
    .handle("list", ({ path }) => Effect.flatMap(Store, (s) => s.listFiles(path.id)).pipe(wire))
    .handle("read", ({ path, urlParams }) =>
      Effect.flatMap(Store, (s) =>
        s.readFile(path.id, urlParams.path, {
          ...(urlParams.startLine === undefined ? {} : { startLine: urlParams.startLine }),
          ...(urlParams.endLine === undefined ? {} : { endLine: urlParams.endLine })
        })
      ).pipe(wire)
    )
    .handle("write", ({ path, urlParams, payload, headers }) =>
      Effect.flatMap(Store, (s) => {
        const version = ifMatch(headers["if-match"])
        return s.writeFile(path.id, urlParams.path, payload.content, {
          ...(version === undefined ? {} : { ifMatch: version }),
          ...(payload.startLine === undefined ? {} : { startLine: payload.startLine }),
          ...(payload.endLine === undefined ? {} : { endLine: payload.endLine })
        })
      }).pipe(wire)
    )
    .handle("delete", ({ path, urlParams, headers }) =>
      Effect.flatMap(Store, (s) => s.deleteFile(path.id, urlParams.path, ifMatch(headers["if-match"]))).pipe(
        wire
      )
    )
)

export const BlocksLive = HttpApiBuilder.group(Api, "blocks", (handlers) =>
  handlers
    .handle("profile", () =>
      Effect.flatMap(Store, (s) => s.readFile(undefined, "profile.md")).pipe(
        wire,
        Effect.flatMap((f) => blocksOf(f.path, f.content))
      )
    )
    .handle("file", ({ path, urlParams }) =>
      Effect.flatMap(Store, (s) => s.readFile(path.id, urlParams.path)).pipe(
        wire,
        Effect.flatMap((f) => blocksOf(f.path, f.content))
      )
    )
)

export const ContextLive = HttpApiBuilder.group(Api, "context", (handlers) =>
  handlers
    .handle("getConfig", ({ path }) =>
      Effect.gen(function* () {
        const store = yield* Store
        const file = yield* store.readFile(path.id, "context-config.json").pipe(
          Effect.catchTag("FileNotFound", () => Effect.succeed(undefined)),
          wire
        )
        if (file === undefined) return {}
        // A corrupt manifest is named, not a 500: the session stays usable for repairing it
        // (PUT this endpoint or the file with the files API).
        const manifest = parseManifest(file.content, `${path.id}/context-config.json`)
        if (Either.isLeft(manifest)) return yield* Effect.fail(toApiError(manifest.left))
        return JSON.parse(file.content) as unknown
      })
    )
    .handle("putConfig", ({ path, payload, headers }) =>
      Effect.gen(function* () {
        const store = yield* Store
        const text = `${JSON.stringify(payload, null, 2)}\n`
        yield* Either.match(parseManifest(text, `${path.id}/context-config.json`), {
          onLeft: (e) => Effect.fail(toApiError(e)),
          onRight: () => Effect.void
        })
        const version = ifMatch(headers["if-match"])
        return yield* store
          .writeFile(path.id, "context-config.json", text, version === undefined ? {} : { ifMatch: version })
          .pipe(wire)
      })
    )
    .handle("preview", ({ path, urlParams }) => preview(path, urlParams))
    .handle("previewAlias", ({ path, urlParams }) => preview(path, urlParams))
    .handle("previous", ({ path, urlParams }) => previousRequest(path, urlParams))
)

/** The context preview (plural path and the seed's singular alias). */
const preview = (
  path: { readonly id: string },
  urlParams: {
    readonly model?: string | undefined
    readonly format?: "openai" | "anthropic" | "react" | undefined
    readonly query?: string | undefined
  }
) =>
  Effect.gen(function* () {
    const store = yield* Store
    const config = yield* GatewayConfig
    const engine = yield* TurnEngine
    yield* store.getSession(path.id).pipe(wire)
    // What the next turn would send first. The model asked for, else the session manifest's, else
    // the gateway's default (CTXO_MODEL).
    const result = yield* engine
      .preview({
        sessionId: path.id,
        defaultModel: config.model,
        tools: agentTools,
        ...(urlParams.query === undefined ? {} : { input: urlParams.query }),
        ...(urlParams.format === undefined ? {} : { format: urlParams.format }),
        ...(urlParams.model === undefined ? {} : { model: urlParams.model })
      })
      .pipe(wire)
    return toPreview(result)
  })

export const ChatLive = HttpApiBuilder.group(Api, "chat", (handlers) =>
  handlers
    .handleRaw("chat", ({ path }) => chatTurn(path))
    .handleRaw("chatAlias", ({ path }) => chatTurn(path))
)

/** One agent turn as Server-Sent Events (plural path and the seed's singular alias). */
const chatTurn = (path: { readonly id: string }) =>
  Effect.gen(function* () {
    const payload = yield* decodeBody(ChatRequest).pipe(
      Effect.withSpan("Gateway.decode", { attributes: { "ctxo.session": path.id } })
    )
    const store = yield* Store
    yield* store.getSession(path.id).pipe(wire)
    const context =
      yield* Effect.context<
        Effect.Effect.Context<
          ReturnType<typeof chat> extends Stream.Stream<infer _A, infer _E, infer R>
            ? Effect.Effect<void, never, R>
            : never
        >
      >()
    const config = yield* GatewayConfig
    const shutdown = yield* Shutdown
    const turn = chat(
      {
        sessionId: path.id,
        message: payload.message,
        ...(payload.model === undefined ? {} : { model: payload.model }),
        ...(payload.idempotencyKey === undefined ? {} : { idempotencyKey: payload.idempotencyKey }),
        ...(payload.references === undefined ? {} : { references: payload.references }),
        ...(payload.node === undefined ? {} : { node: payload.node })
      },
      { defaultModel: config.model, maxSteps: config.maxSteps, stop: Deferred.await(shutdown) }
    ).pipe(Stream.provideContext(context))
    return yield* eventStreamResponse(turn, sseFrame)
  })

export const AdminLive = HttpApiBuilder.group(Api, "admin", (handlers) =>
  handlers.handle("tenants", () =>
    Effect.gen(function* () {
      const tenancy = yield* Tenancy
      const store = yield* Store
      const tenants = yield* Effect.forEach(tenancy.tenants, (tenant) =>
        store.listSessions.pipe(
          Effect.locally(CurrentTenant, tenant),
          Effect.map((sessions) => ({
            tenant,
            sessions: sessions.length,
            dataDir: tenancy.relativeRootOf(tenant)
          })),
          wire
        )
      )
      return { tenants }
    })
  )
)

export const RecordingLive = HttpApiBuilder.group(Api, "recording", (handlers) =>
  handlers.handle("session", ({ path }) =>
    Effect.gen(function* () {
      const store = yield* Store
      const history = yield* HistoryStore
      const tenant = yield* FiberRef.get(CurrentTenant)
      const record = yield* store.getSession(path.id).pipe(wire)
      const files: Record<string, string> = {}
      for (const f of yield* store.listFiles(path.id).pipe(wire))
        if (f.path !== "messages.json" && !f.path.startsWith("tool-results/"))
          files[f.path] = (yield* store.readFile(path.id, f.path).pipe(wire)).content
      const manifest = yield* Either.match(
        parseManifest(files["context-config.json"] ?? "{}", `${path.id}/context-config.json`),
        {
          onLeft: (e) => Effect.fail(toApiError(e)),
          onRight: Effect.succeed
        }
      )
      const prompts: Array<string> = []
      for (const p of manifest.systemPrompt)
        if (p.type === "global")
          prompts.push((yield* store.readFile(undefined, p.file).pipe(wire)).content.trim())
      const doc = yield* history.load(path.id).pipe(wire)
      const fullResults = new Map<string, unknown>()
      for (const m of doc.messages)
        for (const p of m.parts)
          if (p._tag === "tool-result" && p.full !== undefined)
            fullResults.set(
              p.callId,
              yield* history.readFullResult(path.id, p.callId).pipe(Effect.orElseSucceed(() => undefined))
            )
      const recorded = toRecordedSession({
        id: path.id,
        description: record.concept === "" ? `recorded from session ${path.id}` : record.concept,
        history: doc,
        files,
        systemPrompt: prompts.join("\n\n"),
        fullResults,
        tenant,
        now: new Date().toISOString()
      })
      if (recorded.turns.length === 0)
        return yield* new Unprocessable({
          tag: "NothingRecorded",
          message: `Session ${path.id} has no turn to record yet`
        })
      return recorded
    })
  )
)

/** `GET /metrics`: the Prometheus text format (who may scrape is the middleware's decision). */
export const MetricsLive = HttpApiBuilder.group(Api, "metrics", (handlers) =>
  handlers.handleRaw("metrics", () =>
    Effect.map(Metrics.scrape, (text) => HttpServerResponse.text(text, { contentType: Metrics.CONTENT_TYPE }))
  )
)

export const ApiLive = HttpApiBuilder.api(Api).pipe(
  Layer.provide([
    HealthLive,
    SessionsLive,
    TasksLive,
    MemoryLive,
    FilesLive,
    BlocksLive,
    ContextLive,
    HistoryLive,
    MapLive,
    RunsLive,
    AggregateLive,
    ChatLive,
    OpenAILive,
    AdminLive,
    RecordingLive,
    MetricsLive
  ])
)
