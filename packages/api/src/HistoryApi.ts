/**
 * A session's history over HTTP, for people curating what the model sees: its turns with every
 * message as stored (compressed tool results, pins, exclusions and dismissals with the placeholder
 * a model sees instead, what compaction archived), the summaries with the turns they cover; pinning
 * a turn, excluding and restoring a message. Nothing is ever removed from the file. (The request the
 * last turn sent, for a diff against the next one, is the context group's `previous` endpoint.)
 */
import { Dismissal, InputReference, Part } from "@ctxo/history/Message"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"

export const HistoryMessage = Schema.Struct({
  id: Schema.String,
  role: Schema.Literal("user", "assistant", "tool", "system"),
  /** `input` (the user's), `step` (words and a tool call), `final` (the answer), ... */
  kind: Schema.optional(Schema.String),
  step: Schema.optional(Schema.Number),
  /** As stored: tool results compressed (`full` names the file with the whole result). */
  parts: Schema.Array(Part),
  pinned: Schema.Boolean,
  /** Excluded by the user or dismissed by the model (`dismiss_memory`): the model sees `placeholder`. */
  dismissed: Schema.optional(Dismissal),
  placeholder: Schema.optional(Schema.String),
  /** The summary that archived it (compaction): no request shows it any more. */
  archivedBy: Schema.optional(Schema.String),
  references: Schema.optional(Schema.Array(InputReference)),
  usage: Schema.optional(Schema.Struct({ inputTokens: Schema.Number, outputTokens: Schema.Number })),
  createdAt: Schema.optional(Schema.String)
}).annotations({ identifier: "HistoryMessage" })
export type HistoryMessage = typeof HistoryMessage.Type

export const HistoryTurn = Schema.Struct({
  turn: Schema.Number,
  /** The assistant answered (an unfinished turn is running, or was interrupted and can be resumed). */
  finished: Schema.Boolean,
  /** Some message of it is pinned: compaction keeps it and every request shows it. */
  pinned: Schema.Boolean,
  /** The summary its messages were archived into, when compaction took it. */
  archivedBy: Schema.optional(Schema.String),
  messages: Schema.Array(HistoryMessage)
}).annotations({ identifier: "HistoryTurn" })
export type HistoryTurn = typeof HistoryTurn.Type

export const HistorySummary = Schema.Struct({
  id: Schema.String,
  text: Schema.String,
  fromTurn: Schema.Number,
  toTurn: Schema.Number,
  messageCount: Schema.Number,
  createdAt: Schema.optional(Schema.String),
  /** The turns whose messages it archived. */
  turns: Schema.Array(Schema.Number)
}).annotations({ identifier: "HistorySummary" })
export type HistorySummary = typeof HistorySummary.Type

export const HistoryListing = Schema.Struct({
  sessionId: Schema.String,
  turns: Schema.Array(HistoryTurn),
  summaries: Schema.Array(HistorySummary)
}).annotations({ identifier: "HistoryListing" })
export type HistoryListing = typeof HistoryListing.Type

export const PinTurn = Schema.Struct({
  /** Default true; false unpins every message of the turn. */
  pinned: Schema.optional(Schema.Boolean)
}).annotations({ parseOptions: { onExcessProperty: "error" } })

export const ExcludeMessage = Schema.Struct({
  /** Said in the placeholder (`[tool result — excluded by the user: <reason>]`); a dismissal's summary. */
  reason: Schema.optional(Schema.String.pipe(Schema.maxLength(2000)))
}).annotations({ parseOptions: { onExcessProperty: "error" } })

const SessionPath = Schema.Struct({ id: Schema.String })
const TurnPath = Schema.Struct({
  id: Schema.String,
  turn: Schema.NumberFromString.pipe(Schema.int(), Schema.positive())
})
const MessagePath = Schema.Struct({ id: Schema.String, messageId: Schema.String })

export class HistoryGroup extends HttpApiGroup.make("history")
  .add(
    HttpApiEndpoint.get("list", "/api/sessions/:id/history")
      .setPath(SessionPath)
      .addSuccess(HistoryListing)
      .annotate(
        OpenApi.Summary,
        "A session's turns and summaries, as stored, with what the model sees of each"
      )
  )
  .add(
    HttpApiEndpoint.post("pinTurn", "/api/sessions/:id/history/turns/:turn/pin")
      .setPath(TurnPath)
      .setPayload(PinTurn)
      .addSuccess(HistoryTurn)
      .annotate(OpenApi.Summary, "Pin (or unpin) a turn: compaction keeps it and every request shows it")
      .annotate(
        OpenApi.Description,
        "Pinning marks the turn's input (a turn is pinned when any of its messages is); unpinning clears every message of it. A turn compaction already archived cannot be pinned (422 MessageNotFound says so)."
      )
  )
  .add(
    HttpApiEndpoint.post("exclude", "/api/sessions/:id/history/messages/:messageId/exclude")
      .setPath(MessagePath)
      .setPayload(ExcludeMessage)
      .addSuccess(HistoryMessage)
      .annotate(OpenApi.Summary, "Exclude a message: requests show a placeholder with the reason instead")
      .annotate(
        OpenApi.Description,
        "The message stays in messages.json; a tool call keeps its result's place, so pairs stay whole. A pinned message cannot be excluded (422)."
      )
  )
  .add(
    HttpApiEndpoint.post("restore", "/api/sessions/:id/history/messages/:messageId/restore")
      .setPath(MessagePath)
      .addSuccess(HistoryMessage)
      .annotate(OpenApi.Summary, "Undo an exclusion or a model's dismissal: requests show the message again")
  ) {}
