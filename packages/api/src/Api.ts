/**
 * The gateway's HTTP contract. The gateway implements it, tests and the CLI call it through
 * `HttpApiClient.make(Api)`, and `/openapi.json` is generated from it.
 *
 * Session routes are plural (`/api/sessions/:id/...`); the seed's two singular paths
 * (`GET /api/session/:id/context-preview`, `POST /api/session/:id/chat`) stay as aliases of
 * the plural ones. A file's path (it may contain `/`) is the `path` query parameter.
 *
 * Many sessions: a session is `active`, `paused` or `ended` (`POST .../pause`, `.../resume`,
 * `.../end`); it has tasks (`/api/sessions/:id/tasks`) and a task can be sent to many sessions at
 * once (`POST /api/tasks/distribute`), selected by their metadata or concept.
 */

import { FileContent, FileInfo } from "@ctxo/store/FileRecords"
import {
  DistributionMode,
  DistributionResult,
  MetadataKey,
  MetadataValue,
  SessionMetadata,
  SessionRecord,
  Task,
  TaskStatus
} from "@ctxo/store/Records"
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { AggregateGroup } from "./AggregateApi.ts"
import {
  BadGatewayWire,
  BadRequestWire,
  ConflictWire,
  ForbiddenWire,
  GatewayTimeoutWire,
  NotFoundWire,
  PayloadTooLargeWire,
  ServerErrorWire,
  TooManyRequestsWire,
  UnauthorizedWire,
  UnprocessableWire,
  UnsupportedMediaTypeWire
} from "./ApiErrors.ts"
import { ChatCompletion, ChatCompletionRequest } from "./ChatCompletion.ts"
import { HistoryGroup } from "./HistoryApi.ts"
import { MapGroup } from "./MapApi.ts"
import { MemoryGroup } from "./MemoryApi.ts"
import { RunsGroup } from "./RunsApi.ts"

/** Request bodies refuse fields they do not know. */
const strict = <A, I>(schema: Schema.Schema<A, I>) =>
  schema.annotations({ parseOptions: { onExcessProperty: "error" } })

const SessionPath = Schema.Struct({ id: Schema.String })
/** A JSON object (a manifest: its fields are checked by the compiler's manifest schema, 422 naming the field). */
const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
  identifier: "JsonObject"
})
const Line = Schema.NumberFromString.pipe(Schema.int(), Schema.positive())

export const CreateSession = strict(
  Schema.Struct({
    id: Schema.optional(Schema.String),
    concept: Schema.String,
    /** What distribution filters select on: up to 64 keys (letters, digits, `._:-`), values up to 512 characters. */
    metadata: Schema.optional(SessionMetadata)
  })
)
/** A session's concept and metadata changed: metadata is merged, a `null` value removes its key. */
export const UpdateSession = strict(
  Schema.Struct({
    concept: Schema.optional(Schema.String),
    metadata: Schema.optional(Schema.Record({ key: MetadataKey, value: Schema.NullOr(MetadataValue) }))
  })
)

const TaskTitle = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(500))
const TaskDescription = Schema.String.pipe(Schema.maxLength(20_000))
export const CreateTask = strict(
  Schema.Struct({ title: TaskTitle, description: Schema.optional(TaskDescription) })
)
/** A task changed: its status, title or description (`null` removes the description). */
export const UpdateTask = strict(
  Schema.Struct({
    status: Schema.optional(TaskStatus),
    title: Schema.optional(TaskTitle),
    description: Schema.optional(Schema.NullOr(TaskDescription))
  })
)

/**
 * One task for many sessions. `broadcast`: to every session listed, or to every session when none
 * is listed (not to `fromSession`). `filtered`: to those of them whose metadata has every pair of
 * `filter.metadata` and whose concept contains `filter.concept` (case-insensitive); `filter` is
 * required there and refused with `broadcast`. Ended sessions are skipped (reported), paused ones
 * receive the task.
 */
export const DistributeTasks = strict(
  Schema.Struct({
    task: Schema.Struct({ title: TaskTitle, description: Schema.optional(TaskDescription) }),
    mode: DistributionMode,
    sessions: Schema.optional(
      Schema.Array(Schema.String)
        .pipe(Schema.minItems(1), Schema.maxItems(1000))
        .annotations({ description: "The sessions to consider (default: every session of the tenant)" })
    ),
    filter: Schema.optional(
      Schema.Struct({
        metadata: Schema.optional(
          Schema.Record({ key: MetadataKey, value: MetadataValue }).annotations({
            description: "Every pair must be in the session's metadata"
          })
        ),
        concept: Schema.optional(
          Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)).annotations({
            description: "The session's concept contains it (case-insensitive)"
          })
        )
      }).annotations({
        identifier: "DistributionFilterRequest",
        description: "mode filtered only, and required there: at least one of metadata and concept"
      })
    ),
    /** The session the task comes from (kept in each task's `origin`). */
    fromSession: Schema.optional(
      Schema.String.annotations({
        description: "The session the task comes from: kept in each task's origin, not a target unless listed"
      })
    )
  }).annotations({
    description:
      "broadcast: to every listed session, or every session when none is listed; filtered: to those of them the filter selects. Ended sessions are skipped and reported; paused ones receive the task."
  })
)
/** What a distribution did: per session, the task it added or why it skipped the session. */
export const Distribution = Schema.Struct({
  distributionId: Schema.String,
  createdAt: Schema.String,
  mode: DistributionMode,
  /** True when this answers an earlier request with the same Idempotency-Key. */
  replayed: Schema.Boolean,
  results: Schema.Array(DistributionResult)
}).annotations({ identifier: "Distribution" })
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

// The request as the model gets it, typed per format (the compiler's renderers): narrow on
// `format` to read `request`.
const OpenAIToolCall = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("function"),
  function: Schema.Struct({ name: Schema.String, arguments: Schema.String })
})
export const OpenAIRequestMessage = Schema.Union(
  Schema.Struct({ role: Schema.Literal("system", "user"), content: Schema.String }),
  Schema.Struct({
    role: Schema.Literal("assistant"),
    content: Schema.NullOr(Schema.String),
    tool_calls: Schema.optional(Schema.Array(OpenAIToolCall))
  }),
  Schema.Struct({ role: Schema.Literal("tool"), tool_call_id: Schema.String, content: Schema.String })
).annotations({ identifier: "OpenAIRequestMessage" })
const AnthropicBlock = Schema.Union(
  Schema.Struct({ type: Schema.Literal("text"), text: Schema.String }),
  Schema.Struct({
    type: Schema.Literal("tool_use"),
    id: Schema.String,
    name: Schema.String,
    input: Schema.Unknown
  }),
  Schema.Struct({
    type: Schema.Literal("tool_result"),
    tool_use_id: Schema.String,
    content: Schema.String,
    is_error: Schema.optional(Schema.Boolean)
  })
).annotations({ identifier: "AnthropicBlock" })

/** A function tool as the request carries it (the tools source's choice). */
export const ToolSpec = Schema.Struct({
  type: Schema.Literal("function"),
  function: Schema.Struct({
    name: Schema.String,
    description: Schema.optional(Schema.String),
    parameters: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
    strict: Schema.optional(Schema.Boolean)
  })
}).annotations({ identifier: "ToolSpec" })

export const AnthropicTool = Schema.Struct({
  name: Schema.String,
  description: Schema.optional(Schema.String),
  input_schema: Schema.Record({ key: Schema.String, value: Schema.Unknown })
}).annotations({ identifier: "AnthropicTool" })

const previewFields = {
  model: Schema.String,
  report: Schema.Unknown,
  layers: Schema.Array(
    Schema.Struct({ id: Schema.String, tokens: Schema.Number, messages: Schema.optional(Schema.Number) })
  ),
  prefix: Schema.Unknown,
  warnings: Schema.Array(Schema.String)
}
export const Preview = Schema.Union(
  Schema.Struct({
    ...previewFields,
    format: Schema.Literal("openai"),
    request: Schema.Struct({
      messages: Schema.Array(OpenAIRequestMessage),
      tools: Schema.optional(Schema.Array(ToolSpec))
    })
  }),
  Schema.Struct({
    ...previewFields,
    format: Schema.Literal("anthropic"),
    request: Schema.Struct({
      system: Schema.String,
      messages: Schema.Array(
        Schema.Struct({ role: Schema.Literal("user", "assistant"), content: Schema.Array(AnthropicBlock) })
      ),
      tools: Schema.optional(Schema.Array(AnthropicTool))
    })
  }),
  Schema.Struct({
    ...previewFields,
    format: Schema.Literal("react"),
    request: Schema.Struct({ prompt: Schema.String })
  })
).annotations({ identifier: "Preview" })
export type Preview = typeof Preview.Type

export const ChatRequest = strict(
  Schema.Struct({
    message: Schema.String.pipe(Schema.minLength(1)),
    model: Schema.optional(Schema.String),
    /** The same key on a retry means the same turn: its input is not recorded twice. */
    idempotencyKey: Schema.optional(Schema.String),
    /** The thinking-map node this message is about: the turn joins that node's conversation. */
    node: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))),
    /**
     * Files or parts of files for this message, as in the manifest's `references`: `"[file:12:30]"`,
     * `"[file#Heading/Sub]"`, `{ path, startLine, endLine }` or `{ path, block }` (a heading path or
     * a short id `^b3`). They are resolved at each step of the turn.
     */
    references: Schema.optional(
      Schema.Array(
        Schema.Union(
          Schema.String,
          Schema.Struct({
            path: Schema.String,
            startLine: Schema.Int.pipe(Schema.positive()),
            endLine: Schema.Int.pipe(Schema.positive())
          }),
          Schema.Struct({ path: Schema.String, block: Schema.String })
        )
      ).pipe(Schema.maxItems(64))
    )
  })
)

export const Health = Schema.Struct({ status: Schema.Literal("ok"), version: Schema.String })
/** Where the data and the upstream are is told to the admin key only. */
export const Ready = Schema.Struct({
  status: Schema.Literal("ready"),
  model: Schema.String,
  dataDir: Schema.optional(Schema.String),
  upstream: Schema.optional(Schema.String)
})

export class HealthGroup extends HttpApiGroup.make("health")
  .add(HttpApiEndpoint.get("healthz", "/healthz").addSuccess(Health).annotate(OpenApi.Summary, "Liveness"))
  .add(
    HttpApiEndpoint.get("readyz", "/readyz")
      .addSuccess(Ready)
      .annotate(OpenApi.Summary, "Readiness (the data root is readable)")
  ) {}

/** A lifecycle transition: the session's record after it. */
const lifecycleEndpoint = <const Name extends string, const Path extends HttpApiEndpoint.PathSegment>(
  name: Name,
  path: Path
) =>
  HttpApiEndpoint.post(name, path)
    .setPath(SessionPath)
    .addSuccess(SessionRecord)
    .annotate(OpenApi.Summary, `${name[0]!.toUpperCase()}${name.slice(1)} a session`)

export class SessionsGroup extends HttpApiGroup.make("sessions")
  .add(
    HttpApiEndpoint.get("list", "/api/sessions")
      .addSuccess(Schema.Array(SessionRecord))
      .annotate(OpenApi.Summary, "List sessions")
  )
  .add(
    HttpApiEndpoint.post("create", "/api/sessions")
      .setPayload(CreateSession)
      .addSuccess(SessionRecord, { status: 201 })
      .annotate(OpenApi.Summary, "Create a session")
  )
  .add(
    HttpApiEndpoint.get("get", "/api/sessions/:id")
      .setPath(SessionPath)
      .addSuccess(SessionRecord)
      .annotate(OpenApi.Summary, "Get a session")
  )
  .add(
    HttpApiEndpoint.del("delete", "/api/sessions/:id")
      .setPath(SessionPath)
      .addSuccess(HttpApiSchema.NoContent)
      .annotate(OpenApi.Summary, "Delete a session")
  )
  .add(
    HttpApiEndpoint.patch("update", "/api/sessions/:id")
      .setPath(SessionPath)
      .setPayload(UpdateSession)
      .addSuccess(SessionRecord)
      .annotate(OpenApi.Summary, "Change a session's concept or metadata (merged; null removes a key)")
  )
  .add(
    lifecycleEndpoint("pause", "/api/sessions/:id/pause").annotate(
      OpenApi.Description,
      "active -> paused: the session takes no turn (chat, /v1 with the session) until it is resumed (409 SessionNotActive); its files, tasks and previews stay available. Waits for a running turn to finish. Pausing a paused session changes nothing (200); an ended session is 409 IllegalTransition."
    )
  )
  .add(
    lifecycleEndpoint("resume", "/api/sessions/:id/resume").annotate(
      OpenApi.Description,
      "paused -> active. Resuming an active session changes nothing (200); an ended session is 409 IllegalTransition."
    )
  )
  .add(
    lifecycleEndpoint("end", "/api/sessions/:id/end").annotate(
      OpenApi.Description,
      "active | paused -> ended, for good: no more turns, tasks or task changes (409), reads and previews stay. Waits for a running turn to finish; ending an ended session changes nothing (200)."
    )
  ) {}

const TaskPath = Schema.Struct({ id: Schema.String, taskId: Schema.String })

export class TasksGroup extends HttpApiGroup.make("tasks")
  .add(
    HttpApiEndpoint.get("list", "/api/sessions/:id/tasks")
      .setPath(SessionPath)
      .addSuccess(Schema.Array(Task))
      .annotate(OpenApi.Summary, "List a session's tasks (oldest first)")
  )
  .add(
    HttpApiEndpoint.post("create", "/api/sessions/:id/tasks")
      .setPath(SessionPath)
      .setPayload(CreateTask)
      .addSuccess(Task, { status: 201 })
      .annotate(OpenApi.Summary, "Add a task to a session (pending; 409 when the session is ended)")
  )
  .add(
    HttpApiEndpoint.patch("update", "/api/sessions/:id/tasks/:taskId")
      .setPath(TaskPath)
      .setPayload(UpdateTask)
      .addSuccess(Task)
      .annotate(OpenApi.Summary, "Change a task's status, title or description (404 for an unknown task)")
  )
  .add(
    HttpApiEndpoint.post("distribute", "/api/tasks/distribute")
      .setHeaders(
        Schema.Struct({
          "idempotency-key": Schema.optional(
            Schema.String.annotations({
              description:
                "A retry with the same key answers the first distribution (`replayed: true`) and adds no task twice, also after a crash halfway; the same key with another request is 409 DistributionConflict."
            })
          )
        })
      )
      .setPayload(DistributeTasks)
      .addSuccess(Distribution)
      .annotate(OpenApi.Summary, "Send one task to many sessions (broadcast or filtered)")
      .annotate(
        OpenApi.Description,
        "Adds the task to each selected session and answers, per session, `{ session, taskId }` or `{ session, skipped, message }` (`skipped`: `ended`, `not_found` for a listed session this tenant does not have, `not_matched` for a listed session the filter leaves out). Paused sessions receive the task."
      )
  ) {}

export class FilesGroup extends HttpApiGroup.make("files")
  .add(
    HttpApiEndpoint.get("list", "/api/sessions/:id/files")
      .setPath(SessionPath)
      .addSuccess(Schema.Array(FileInfo))
      .annotate(OpenApi.Summary, "List a session's files")
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
      .annotate(OpenApi.Summary, "Read a file (or a line range)")
  )
  .add(
    HttpApiEndpoint.put("write", "/api/sessions/:id/file")
      .setPath(SessionPath)
      .setUrlParams(Schema.Struct({ path: Schema.String }))
      .setHeaders(Schema.Struct({ "if-match": Schema.optional(Schema.String) }))
      .setPayload(WriteFile)
      .addSuccess(FileInfo)
      .annotate(OpenApi.Summary, "Write a file (or a line range; If-Match for optimistic concurrency)")
  )
  .add(
    HttpApiEndpoint.del("delete", "/api/sessions/:id/file")
      .setPath(SessionPath)
      .setUrlParams(Schema.Struct({ path: Schema.String }))
      .setHeaders(Schema.Struct({ "if-match": Schema.optional(Schema.String) }))
      .addSuccess(HttpApiSchema.NoContent)
      .annotate(OpenApi.Summary, "Delete a file")
  ) {}

export class RecordingGroup extends HttpApiGroup.make("recording").add(
  HttpApiEndpoint.get("session", "/api/sessions/:id/recording")
    .setPath(SessionPath)
    .addSuccess(Schema.Unknown)
    .annotate(OpenApi.Summary, "Export the session as a recorded session")
    .annotate(
      OpenApi.Description,
      "The session as a recorded session (ctxo.session/v1): save it under fixtures/sessions/ and `ctxo replay` and `pnpm eval` run it."
    )
) {}

export class BlocksGroup extends HttpApiGroup.make("blocks")
  .add(
    HttpApiEndpoint.get("profile", "/api/profile/blocks")
      .addSuccess(Schema.Array(BlockNode))
      .annotate(OpenApi.Summary, "Block tree of profile.md")
  )
  .add(
    HttpApiEndpoint.get("file", "/api/sessions/:id/blocks")
      .setPath(SessionPath)
      .setUrlParams(Schema.Struct({ path: Schema.String }))
      .addSuccess(Schema.Array(BlockNode))
      .annotate(OpenApi.Summary, "Block tree of a session file")
  ) {}

const previewEndpoint = <const Name extends string, const Path extends HttpApiEndpoint.PathSegment>(
  name: Name,
  path: Path
) =>
  HttpApiEndpoint.get(name, path)
    .setPath(SessionPath)
    .setUrlParams(
      Schema.Struct({
        model: Schema.optional(Schema.String),
        format: Schema.optional(Schema.Literal("openai", "anthropic", "react")),
        query: Schema.optional(Schema.String)
      })
    )
    .addSuccess(Preview)
    .annotate(OpenApi.Summary, "Compile the session's context (no model call)")

export class ContextGroup extends HttpApiGroup.make("context")
  .add(
    HttpApiEndpoint.get("getConfig", "/api/sessions/:id/config")
      .setPath(SessionPath)
      .addSuccess(Schema.Unknown)
      .annotate(OpenApi.Summary, "Read the session's context-config.json")
  )
  .add(
    HttpApiEndpoint.put("putConfig", "/api/sessions/:id/config")
      .setPath(SessionPath)
      .setHeaders(Schema.Struct({ "if-match": Schema.optional(Schema.String) }))
      .setPayload(JsonObject)
      .addSuccess(FileInfo)
      .annotate(OpenApi.Summary, "Write the session's context-config.json (validated)")
  )
  .add(previewEndpoint("preview", "/api/sessions/:id/context-preview"))
  .add(
    HttpApiEndpoint.get("previous", "/api/sessions/:id/context-preview/previous")
      .setPath(SessionPath)
      .setUrlParams(
        Schema.Struct({
          model: Schema.optional(Schema.String),
          format: Schema.optional(Schema.Literal("openai", "anthropic", "react"))
        })
      )
      .addSuccess(Preview)
      .annotate(
        OpenApi.Summary,
        "The request the last turn sent first, compiled again from the history before it"
      )
      .annotate(
        OpenApi.Description,
        "The session's last turn: its input (with its references) over the history as it stood before that turn, with today's files, manifest and memory (memories made from that turn on left out), for the model and format asked: what to compare the context preview of the next turn with. 404 NoTurnYet when the session has no turn."
      )
  )
  .add(
    previewEndpoint("previewAlias", "/api/session/:id/context-preview")
      .annotate(OpenApi.Summary, "Context preview (alias of /api/sessions/{id}/context-preview)")
      .annotate(OpenApi.Deprecated, true)
  ) {}

const chatEndpoint = <const Name extends string, const Path extends HttpApiEndpoint.PathSegment>(
  name: Name,
  path: Path
) =>
  HttpApiEndpoint.post(name, path)
    .setPath(SessionPath)
    .setPayload(ChatRequest)
    .addSuccess(
      Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/event-stream" }))
    )
    .annotate(OpenApi.Summary, "Run one agent turn (Server-Sent Events)")
    .annotate(
      OpenApi.Description,
      "Runs one turn of the agent (ReAct tool loop) and streams Server-Sent Events: turn, text-delta, tool-call, tool-result, compaction-started, compaction-finished, compaction-fell-back, usage, done, error. `idempotencyKey` in the body makes a retry resume the turn (or return the answer of a finished one); the same key with another message is 409. A paused or ended session is 409 SessionNotActive (`details.state`), before the stream starts; a turn that fails once started ends its stream with an `error` event."
    )

export class ChatGroup extends HttpApiGroup.make("chat")
  .add(chatEndpoint("chat", "/api/sessions/:id/chat"))
  .add(
    chatEndpoint("chatAlias", "/api/session/:id/chat")
      .annotate(OpenApi.Summary, "Run one agent turn (alias of /api/sessions/{id}/chat)")
      .annotate(OpenApi.Deprecated, true)
  ) {}

export const Model = Schema.Struct({
  /** Provider-qualified (`openai/gpt-4o`); forwarded upstream without the provider prefix. */
  id: Schema.String,
  object: Schema.Literal("model"),
  created: Schema.Number,
  owned_by: Schema.String,
  context_window: Schema.Number,
  max_input_tokens: Schema.Number,
  max_output_tokens: Schema.Number,
  aliases: Schema.Array(Schema.String)
}).annotations({ identifier: "Model" })

export const ModelList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(Model)
}).annotations({ identifier: "ModelList" })

export const StatelessCompile = strict(
  Schema.Struct({
    /** context-config.json as an object (default: the notebook policy, system-prompt.md). */
    manifest: Schema.optional(JsonObject),
    /** The session's files by path. */
    files: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
    /** Files of the data root by path (system-prompt.md, profile.md). */
    globalFiles: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
    /**
     * The history: a `ctxo.history/v1` document, or the seed's plain array of chat messages
     * (`{ role, content }`, OpenAI `tool_calls` and `tool` replies), as `messages.json` may hold.
     */
    history: Schema.optional(Schema.Union(JsonObject, Schema.Array(Schema.Unknown))),
    query: Schema.optional(Schema.String),
    model: Schema.optional(Schema.String),
    format: Schema.optional(Schema.Literal("openai", "anthropic", "react"))
  })
)

/** The headers `/v1/chat/completions` reads (all optional). */
export const ChatCompletionHeaders = Schema.Struct({
  "x-ctxo-session": Schema.optional(
    Schema.String.annotations({
      description: "Session mode: the session whose context ctxo adds (or metadata.session_id in the body)."
    })
  ),
  "idempotency-key": Schema.optional(
    Schema.String.annotations({
      description:
        "Session mode: a retry with the same key records the input once (resumes the turn, or returns the answer of a finished one); the same key with another message is 409 idempotency_key_reused."
    })
  ),
  "x-ctxo-record": Schema.optional(
    Schema.String.annotations({
      description:
        "Session mode: `false` compiles the session's context and forwards the request but records nothing (evaluations, dry runs); the response says `x-ctxo-recorded: false`."
    })
  )
})

const ModelPath = Schema.Struct({ id: Schema.String })
const QualifiedModelPath = Schema.Struct({ provider: Schema.String, name: Schema.String })

export class OpenAIGroup extends HttpApiGroup.make("openai")
  .add(
    HttpApiEndpoint.get("models", "/v1/models")
      .addSuccess(ModelList)
      .annotate(OpenApi.Summary, "List models (the model registry)")
  )
  .add(
    HttpApiEndpoint.get("model", "/v1/models/:id")
      .setPath(ModelPath)
      .addSuccess(Model)
      .annotate(OpenApi.Summary, "Retrieve a model")
      .annotate(
        OpenApi.Description,
        "By id (`openai%2Fgpt-4o` as the openai SDK encodes it), bare name (`gpt-4o`) or alias; an unknown model is 404 model_not_found."
      )
  )
  .add(
    HttpApiEndpoint.get("qualifiedModel", "/v1/models/:provider/:name")
      .setPath(QualifiedModelPath)
      .addSuccess(Model)
      .annotate(OpenApi.Summary, "Retrieve a model by its provider-qualified id (`/v1/models/openai/gpt-4o`)")
  )
  .add(
    HttpApiEndpoint.post("compile", "/v1/compile")
      .setPayload(StatelessCompile)
      .addSuccess(Preview)
      .annotate(
        OpenApi.Summary,
        "Compile statelessly (manifest, files, history, query in; request and report out)"
      )
  )
  .add(
    HttpApiEndpoint.post("chatCompletions", "/v1/chat/completions")
      .setPayload(ChatCompletionRequest)
      .setHeaders(ChatCompletionHeaders)
      .addSuccess(ChatCompletion)
      .annotate(OpenApi.Summary, "Create a chat completion (OpenAI-compatible)")
      .annotate(
        OpenApi.Description,
        "OpenAI-compatible, streaming (`stream: true`: Server-Sent Events of chat.completion.chunk, then `data: [DONE]`) and not. With a session (header X-Ctxo-Session or metadata.session_id) send only the new user message (or the tool results): ctxo adds the session's context and records the turn; earlier messages the client sends are ignored (`x-ctxo-ignored-messages`), non-text parts reduced to text (`x-ctxo-reduced-parts`); `x-ctxo-turn`, `x-ctxo-tokens-used`, `x-ctxo-tokens-available`, `x-ctxo-cut-turns` and `x-ctxo-prefix-hash` describe the compiled context. `Idempotency-Key` makes retries safe; `x-ctxo-node` names the thinking-map node the message is about (its turn joins that node's conversation); `x-ctxo-record: false` records nothing. A paused or ended session is 409 `session_not_active` (with `x-ctxo-record: false` too). Without a session, the messages are fitted to the model's window (oldest whole turns first, `x-ctxo-dropped-turns`) and forwarded. The model may be provider-qualified (`openai/gpt-4o`): it is forwarded without the prefix, to the upstream of that provider when several are configured. Errors are OpenAI's `{ error: { message, type, code, param } }` with the upstream's status, type, code and rate-limit headers passed on; an error before the first chunk of a stream is an HTTP status, after it an `error` data frame."
      )
  ) {}

export class AdminGroup extends HttpApiGroup.make("admin").add(
  HttpApiEndpoint.get("tenants", "/admin/tenants")
    .addSuccess(
      Schema.Struct({
        tenants: Schema.Array(
          /** `dataDir` is relative to the data root (`tenants/acme`). */
          Schema.Struct({ tenant: Schema.String, sessions: Schema.Number, dataDir: Schema.String })
        )
      })
    )
    .annotate(OpenApi.Summary, "List tenants and their sessions (admin key)")
) {}

/**
 * Prometheus metrics in the text exposition format 0.0.4: requests by route and status, latency,
 * tokens by model, compactions, refusals, upstream errors by status. With API keys configured, the
 * admin key only (like `/admin/*`).
 */
export class MetricsGroup extends HttpApiGroup.make("metrics").add(
  HttpApiEndpoint.get("metrics", "/metrics")
    .addSuccess(HttpApiSchema.Text({ contentType: "text/plain; version=0.0.4; charset=utf-8" }))
    .annotate(OpenApi.Summary, "Prometheus metrics (admin key when keys are configured)")
) {}

/** A JSON Schema `$id` that is not a unique URI (`Schema.Unknown` renders as `/schemas/unknown`). */
const dropSchemaIds = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(dropSchemaIds)
  if (typeof value !== "object" || value === null) return value
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value))
    if (!(k === "$id" && typeof v === "string" && v.startsWith("/schemas/"))) out[k] = dropSchemaIds(v)
  return out
}

/**
 * The document as strict OpenAPI 3.1 validators want it: no repeated `$id`, the API key as a bearer
 * security scheme (also `x-api-key`), required where keys are configured; health is public.
 */
const finishSpec = (spec: Record<string, unknown>): Record<string, unknown> => {
  const out = dropSchemaIds(spec) as {
    components?: Record<string, unknown>
    paths?: Record<string, Record<string, Record<string, unknown>>>
    security?: unknown
  }
  out.components = {
    ...out.components,
    securitySchemes: {
      bearer: {
        type: "http",
        scheme: "bearer",
        description:
          "An API key (CTXO_API_KEYS, the admin key for /admin): `Authorization: Bearer <key>`. Without configured keys the gateway needs none."
      },
      apiKey: { type: "apiKey", in: "header", name: "x-api-key", description: "The same key, as a header." }
    }
  }
  out.security = [{ bearer: [] }, { apiKey: [] }, {}]
  for (const path of ["/healthz", "/readyz"]) {
    const get = out.paths?.[path]?.get
    if (get !== undefined) get.security = [{}]
  }
  return out
}

/** Every endpoint can answer with any of the wire errors (the status says which). */
export class Api extends HttpApi.make("ctxo")
  .addError(BadRequestWire)
  .addError(UnauthorizedWire)
  .addError(ForbiddenWire)
  .addError(NotFoundWire)
  .addError(ConflictWire)
  .addError(PayloadTooLargeWire)
  .addError(UnsupportedMediaTypeWire)
  .addError(UnprocessableWire)
  .addError(TooManyRequestsWire)
  .addError(ServerErrorWire)
  .addError(BadGatewayWire)
  .addError(GatewayTimeoutWire)
  .add(HealthGroup)
  .add(SessionsGroup)
  .add(TasksGroup)
  .add(MemoryGroup)
  .add(FilesGroup)
  .add(BlocksGroup)
  .add(ContextGroup)
  .add(HistoryGroup)
  .add(MapGroup)
  .add(RunsGroup)
  .add(AggregateGroup)
  .add(ChatGroup)
  .add(OpenAIGroup)
  .add(AdminGroup)
  .add(RecordingGroup)
  .add(MetricsGroup)
  .annotate(OpenApi.Title, "ctxo gateway")
  .annotate(OpenApi.Version, "0.1.0")
  .annotate(OpenApi.Transform, finishSpec) {}
