/**
 * The gateway's HTTP contract. The gateway implements it, tests and the CLI call it through
 * `HttpApiClient.make(Api)`, and `/openapi.json` is generated from it.
 *
 * Paths seed 000 names keep their names (`GET /api/profile/blocks`,
 * `GET /api/session/:id/context-preview`); chat is `POST /api/session/:id/chat` (Server-Sent
 * Events). A file's path (it may contain `/`) is the `path` query parameter.
 */

import { FileContent, FileInfo, SessionRecord } from "@ctxo/store/Store"
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import {
  BadRequestWire,
  ConflictWire,
  NotFoundWire,
  ServerErrorWire,
  UnprocessableWire
} from "./ApiErrors.ts"

/** Request bodies refuse fields they do not know. */
const strict = <A, I>(schema: Schema.Schema<A, I>) =>
  schema.annotations({ parseOptions: { onExcessProperty: "error" } })

const SessionPath = Schema.Struct({ id: Schema.String })
const Line = Schema.NumberFromString.pipe(Schema.int(), Schema.positive())

export const CreateSession = strict(
  Schema.Struct({ id: Schema.optional(Schema.String), concept: Schema.String })
)
export const WriteFile = strict(
  Schema.Struct({
    content: Schema.String,
    startLine: Schema.optional(Schema.Int.pipe(Schema.positive())),
    endLine: Schema.optional(Schema.Int.pipe(Schema.nonNegative()))
  })
)

export const BlockNode: Schema.Schema<BlockNode> = Schema.Struct({
  id: Schema.String,
  heading: Schema.String,
  level: Schema.Number,
  startLine: Schema.Number,
  endLine: Schema.Number,
  children: Schema.Array(Schema.suspend(() => BlockNode))
}).annotations({ identifier: "BlockNode" })
export interface BlockNode {
  readonly id: string
  readonly heading: string
  readonly level: number
  readonly startLine: number
  readonly endLine: number
  readonly children: ReadonlyArray<BlockNode>
}

export const Preview = Schema.Struct({
  model: Schema.String,
  format: Schema.String,
  request: Schema.Unknown,
  report: Schema.Unknown,
  layers: Schema.Array(
    Schema.Struct({ id: Schema.String, tokens: Schema.Number, messages: Schema.optional(Schema.Number) })
  ),
  prefix: Schema.Unknown,
  warnings: Schema.Array(Schema.String)
})

export const ChatRequest = strict(
  Schema.Struct({
    message: Schema.String.pipe(Schema.minLength(1)),
    model: Schema.optional(Schema.String),
    /** The same key on a retry means the same turn: its input is not recorded twice. */
    idempotencyKey: Schema.optional(Schema.String)
  })
)

export const Health = Schema.Struct({ status: Schema.Literal("ok"), version: Schema.String })
export const Ready = Schema.Struct({
  status: Schema.Literal("ready"),
  dataDir: Schema.String,
  model: Schema.String,
  upstream: Schema.String
})

export class HealthGroup extends HttpApiGroup.make("health")
  .add(HttpApiEndpoint.get("healthz", "/healthz").addSuccess(Health))
  .add(HttpApiEndpoint.get("readyz", "/readyz").addSuccess(Ready)) {}

export class SessionsGroup extends HttpApiGroup.make("sessions")
  .add(HttpApiEndpoint.get("list", "/api/sessions").addSuccess(Schema.Array(SessionRecord)))
  .add(
    HttpApiEndpoint.post("create", "/api/sessions")
      .setPayload(CreateSession)
      .addSuccess(SessionRecord, { status: 201 })
  )
  .add(HttpApiEndpoint.get("get", "/api/sessions/:id").setPath(SessionPath).addSuccess(SessionRecord))
  .add(
    HttpApiEndpoint.del("delete", "/api/sessions/:id")
      .setPath(SessionPath)
      .addSuccess(HttpApiSchema.NoContent)
  ) {}

export class FilesGroup extends HttpApiGroup.make("files")
  .add(
    HttpApiEndpoint.get("list", "/api/sessions/:id/files")
      .setPath(SessionPath)
      .addSuccess(Schema.Array(FileInfo))
  )
  .add(
    HttpApiEndpoint.get("read", "/api/sessions/:id/file")
      .setPath(SessionPath)
      .setUrlParams(
        Schema.Struct({
          path: Schema.String,
          startLine: Schema.optional(Line),
          endLine: Schema.optional(Line)
        })
      )
      .addSuccess(FileContent)
  )
  .add(
    HttpApiEndpoint.put("write", "/api/sessions/:id/file")
      .setPath(SessionPath)
      .setUrlParams(Schema.Struct({ path: Schema.String }))
      .setHeaders(Schema.Struct({ "if-match": Schema.optional(Schema.String) }))
      .setPayload(WriteFile)
      .addSuccess(FileInfo)
  )
  .add(
    HttpApiEndpoint.del("delete", "/api/sessions/:id/file")
      .setPath(SessionPath)
      .setUrlParams(Schema.Struct({ path: Schema.String }))
      .setHeaders(Schema.Struct({ "if-match": Schema.optional(Schema.String) }))
      .addSuccess(HttpApiSchema.NoContent)
  ) {}

export class RecordingGroup extends HttpApiGroup.make("recording").add(
  HttpApiEndpoint.get("session", "/api/sessions/:id/recording")
    .setPath(SessionPath)
    .addSuccess(Schema.Unknown)
    .annotate(
      OpenApi.Description,
      "The session as a recorded session (ctxo.session/v1): save it under fixtures/sessions/ and `ctxo replay` and `pnpm eval` run it."
    )
) {}

export class BlocksGroup extends HttpApiGroup.make("blocks")
  .add(HttpApiEndpoint.get("profile", "/api/profile/blocks").addSuccess(Schema.Array(BlockNode)))
  .add(
    HttpApiEndpoint.get("file", "/api/sessions/:id/blocks")
      .setPath(SessionPath)
      .setUrlParams(Schema.Struct({ path: Schema.String }))
      .addSuccess(Schema.Array(BlockNode))
  ) {}

export class ContextGroup extends HttpApiGroup.make("context")
  .add(
    HttpApiEndpoint.get("getConfig", "/api/sessions/:id/config")
      .setPath(SessionPath)
      .addSuccess(Schema.Unknown)
  )
  .add(
    HttpApiEndpoint.put("putConfig", "/api/sessions/:id/config")
      .setPath(SessionPath)
      .setHeaders(Schema.Struct({ "if-match": Schema.optional(Schema.String) }))
      .setPayload(Schema.Unknown)
      .addSuccess(FileInfo)
  )
  .add(
    HttpApiEndpoint.get("preview", "/api/session/:id/context-preview")
      .setPath(SessionPath)
      .setUrlParams(
        Schema.Struct({
          model: Schema.optional(Schema.String),
          format: Schema.optional(Schema.Literal("openai", "anthropic", "react")),
          query: Schema.optional(Schema.String)
        })
      )
      .addSuccess(Preview)
  ) {}

export class ChatGroup extends HttpApiGroup.make("chat").add(
  HttpApiEndpoint.post("chat", "/api/session/:id/chat")
    .setPath(SessionPath)
    .setPayload(ChatRequest)
    .addSuccess(
      Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/event-stream" }))
    )
    .annotate(
      OpenApi.Description,
      "Runs one turn of the agent (ReAct tool loop) and streams Server-Sent Events: text-delta, tool-call, tool-result, compaction-started, compaction-finished, compaction-fell-back, usage, done, error."
    )
) {}

export const ModelList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(
    Schema.Struct({
      id: Schema.String,
      object: Schema.Literal("model"),
      created: Schema.Number,
      owned_by: Schema.String,
      context_window: Schema.Number,
      max_input_tokens: Schema.Number,
      max_output_tokens: Schema.Number,
      aliases: Schema.Array(Schema.String)
    })
  )
})

export const StatelessCompile = strict(
  Schema.Struct({
    /** context-config.json as an object (default: the notebook policy, system-prompt.md). */
    manifest: Schema.optional(Schema.Unknown),
    /** The session's files by path. */
    files: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
    /** Files of the data root by path (system-prompt.md, profile.md). */
    globalFiles: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
    /** A history document (`ctxo.history/v1`). */
    history: Schema.optional(Schema.Unknown),
    query: Schema.optional(Schema.String),
    model: Schema.optional(Schema.String),
    format: Schema.optional(Schema.Literal("openai", "anthropic", "react"))
  })
)

export class OpenAIGroup extends HttpApiGroup.make("openai")
  .add(HttpApiEndpoint.get("models", "/v1/models").addSuccess(ModelList))
  .add(HttpApiEndpoint.post("compile", "/v1/compile").setPayload(StatelessCompile).addSuccess(Preview))
  .add(
    HttpApiEndpoint.post("chatCompletions", "/v1/chat/completions")
      .setPayload(Schema.Unknown)
      .addSuccess(Schema.Unknown)
      .annotate(
        OpenApi.Description,
        "OpenAI-compatible. With a session (header X-Ctxo-Session or metadata.session_id) send only the new user message (or the tool results): ctxo adds the session's context and records the turn. Without one, the messages are fitted to the model's window and forwarded."
      )
  ) {}

export class AdminGroup extends HttpApiGroup.make("admin").add(
  HttpApiEndpoint.get("tenants", "/admin/tenants").addSuccess(
    Schema.Struct({
      tenants: Schema.Array(
        Schema.Struct({ tenant: Schema.String, sessions: Schema.Number, dataDir: Schema.String })
      )
    })
  )
) {}

/** Every endpoint can answer with any of the wire errors (the status says which). */
export class Api extends HttpApi.make("ctxo")
  .addError(BadRequestWire)
  .addError(NotFoundWire)
  .addError(ConflictWire)
  .addError(UnprocessableWire)
  .addError(ServerErrorWire)
  .add(HealthGroup)
  .add(SessionsGroup)
  .add(FilesGroup)
  .add(BlocksGroup)
  .add(ContextGroup)
  .add(ChatGroup)
  .add(OpenAIGroup)
  .add(AdminGroup)
  .add(RecordingGroup)
  .annotate(OpenApi.Title, "ctxo gateway")
  .annotate(OpenApi.Version, "0.1.0") {}
