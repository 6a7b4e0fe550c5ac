import { clipFile, clipSentence } from "@ctxo/store/DecodeError"
import { Schema } from "effect"

/**
 * A session's `messages.json` that cannot be read as history. Names the file and, for a decode
 * error, the JSON path and what was expected (`reason`); nothing is overwritten. The message is
 * one sentence of at most 300 characters.
 */
export class HistoryCorrupt extends Schema.TaggedError<HistoryCorrupt>("@ctxo/history/HistoryCorrupt")(
  "HistoryCorrupt",
  { file: Schema.String, reason: Schema.String }
) {
  override get message(): string {
    return clipSentence(`History file ${clipFile(this.file)} cannot be read: ${this.reason}`)
  }
}

/** Reading or writing history failed at the file system. */
export class HistoryIOError extends Schema.TaggedError<HistoryIOError>("@ctxo/history/HistoryIOError")(
  "HistoryIOError",
  { file: Schema.String, operation: Schema.String, reason: Schema.String }
) {
  override get message(): string {
    return `Could not ${this.operation} ${this.file}: ${this.reason}`
  }
}

/** A session id that would leave the data directory (`..`, `/`, NUL, ...). */
export class InvalidSessionId extends Schema.TaggedError<InvalidSessionId>("@ctxo/history/InvalidSessionId")(
  "InvalidSessionId",
  { sessionId: Schema.String }
) {
  override get message(): string {
    return `Invalid session id "${this.sessionId}": use letters, digits, ".", "_" and "-" only`
  }
}

/** A curation or step that names a message the history does not have, or the wrong kind of message. */
export class MessageNotFound extends Schema.TaggedError<MessageNotFound>("@ctxo/history/MessageNotFound")(
  "MessageNotFound",
  { messageId: Schema.String, reason: Schema.String }
) {
  override get message(): string {
    return `Message ${this.messageId}: ${this.reason}`
  }
}

/** An idempotency key reused with a different message: the first message's turn keeps the key. */
export class IdempotencyConflict extends Schema.TaggedError<IdempotencyConflict>(
  "@ctxo/history/IdempotencyConflict"
)("IdempotencyConflict", { key: Schema.String, turn: Schema.Int }) {
  override get message(): string {
    return `Idempotency key ${JSON.stringify(this.key.slice(0, 120))} was used for a different message (turn ${this.turn}); send a new key for a new message`
  }
}

/** A history of a session that is gone (deleted meanwhile): it is not written back. */
export type { SessionNotFound } from "@ctxo/store/StoreErrors"

export type HistoryError =
  | HistoryCorrupt
  | HistoryIOError
  | InvalidSessionId
  | import("@ctxo/store/StoreErrors").SessionNotFound
