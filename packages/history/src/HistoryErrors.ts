import { Schema } from "effect"

/** A session's `messages.json` that cannot be read as history. Names the file; nothing is overwritten. */
export class HistoryCorrupt extends Schema.TaggedError<HistoryCorrupt>("@ctxo/history/HistoryCorrupt")(
  "HistoryCorrupt",
  { file: Schema.String, reason: Schema.String }
) {
  override get message(): string {
    return `History file ${this.file} cannot be read: ${this.reason}`
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

export type HistoryError = HistoryCorrupt | HistoryIOError | InvalidSessionId
