/**
 * The events of a chat turn's stream (`POST /api/sessions/:id/chat`, `text/event-stream`): each
 * frame is `event: <type>` and `data: <one of these as JSON>`. A client decodes them with
 * `ChatEvent` (`@ctxo/client/Chat` does) and accumulates `text-delta`, `tool-call` and
 * `tool-result` into message parts with `@ctxo/history/PartAccumulator`, the module the gateway
 * uses for the parts its `done` event carries.
 */
import { Part } from "@ctxo/history/Message"
import { Schema } from "effect"

export const ChatEvent = Schema.Union(
  /** The turn began (or a retry with the same idempotency key resumed it). */
  Schema.Struct({ type: Schema.Literal("turn"), turn: Schema.Number, resumed: Schema.Boolean }),
  /** Compaction before the turn: these turns go into a summary, those are kept. */
  Schema.Struct({
    type: Schema.Literal("compaction-started"),
    archivedTurns: Schema.Array(Schema.Number),
    keptTurns: Schema.Array(Schema.Number)
  }),
  Schema.Struct({
    type: Schema.Literal("compaction-finished"),
    summaryId: Schema.NullOr(Schema.String),
    archivedMessages: Schema.Number
  }),
  /** The summary could not be written in time: recent turns only (the message says so). */
  Schema.Struct({ type: Schema.Literal("compaction-fell-back"), message: Schema.String }),
  Schema.Struct({ type: Schema.Literal("text-delta"), text: Schema.String }),
  /** `arguments` is the JSON text the model wrote. */
  Schema.Struct({
    type: Schema.Literal("tool-call"),
    id: Schema.String,
    name: Schema.String,
    arguments: Schema.String
  }),
  /** `result` is the tool's whole result (`status`, `data`, `error`, ...); history keeps it compressed. */
  Schema.Struct({
    type: Schema.Literal("tool-result"),
    id: Schema.String,
    name: Schema.String,
    result: Schema.Unknown
  }),
  Schema.Struct({ type: Schema.Literal("usage"), inputTokens: Schema.Number, outputTokens: Schema.Number }),
  /** The answer; `parts` are what this stream carried, accumulated (empty for a finished turn replayed). */
  Schema.Struct({
    type: Schema.Literal("done"),
    turn: Schema.Number,
    text: Schema.String,
    steps: Schema.Number,
    parts: Schema.Array(Part)
  }),
  /** The turn failed once started (its last event); `tag` names the error (`BadGateway`, `Shutdown`, ...). */
  Schema.Struct({ type: Schema.Literal("error"), tag: Schema.String, message: Schema.String })
).annotations({ identifier: "ChatEvent" })
export type ChatEvent = typeof ChatEvent.Type
