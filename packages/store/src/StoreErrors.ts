import { Schema } from "effect"
import { clipSentence } from "./DecodeError.ts"

/** A session that does not exist in the data root. */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>("@ctxo/store/SessionNotFound")(
  "SessionNotFound",
  { sessionId: Schema.String }
) {
  override get message() {
    return `No session ${this.sessionId}`
  }
}

export class SessionExists extends Schema.TaggedError<SessionExists>("@ctxo/store/SessionExists")(
  "SessionExists",
  { sessionId: Schema.String }
) {
  override get message() {
    return `Session ${this.sessionId} already exists`
  }
}

export class FileNotFound extends Schema.TaggedError<FileNotFound>("@ctxo/store/FileNotFound")(
  "FileNotFound",
  {
    path: Schema.String
  }
) {
  override get message() {
    return `No file ${this.path}`
  }
}

/** A session has no run of this id. */
export class RunNotFound extends Schema.TaggedError<RunNotFound>("@ctxo/store/RunNotFound")("RunNotFound", {
  sessionId: Schema.String,
  runId: Schema.String
}) {
  override get message() {
    return `Session ${this.sessionId} has no run ${this.runId.slice(0, 120)}`
  }
}

/** A path or session id that leaves its directory, or is not a valid name. */
export class PathRefused extends Schema.TaggedError<PathRefused>("@ctxo/store/PathRefused")("PathRefused", {
  path: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `Path ${JSON.stringify(this.path)} refused: ${this.reason}`
  }
}

/** A write whose `If-Match` version is not the file's current version. */
export class VersionConflict extends Schema.TaggedError<VersionConflict>("@ctxo/store/VersionConflict")(
  "VersionConflict",
  { path: Schema.String, expected: Schema.String, actual: Schema.NullOr(Schema.String) }
) {
  override get message() {
    return `${this.path} changed since version ${this.expected} (now ${this.actual ?? "deleted"})`
  }
}

/** A line range outside the file. */
export class InvalidRange extends Schema.TaggedError<InvalidRange>("@ctxo/store/InvalidRange")(
  "InvalidRange",
  {
    path: Schema.String,
    reason: Schema.String
  }
) {
  override get message() {
    return `${this.path}: ${this.reason}`
  }
}

export class StoreIOError extends Schema.TaggedError<StoreIOError>("@ctxo/store/StoreIOError")(
  "StoreIOError",
  {
    path: Schema.String,
    operation: Schema.String,
    reason: Schema.String
  }
) {
  override get message() {
    return `Cannot ${this.operation} ${this.path}: ${this.reason}`
  }
}

/**
 * A file the store reads as data (a session's tasks.json) that does not decode: the file, the JSON
 * path and what was expected. Nothing is overwritten; repair the file (it is plain JSON).
 */
export class CorruptFile extends Schema.TaggedError<CorruptFile>("@ctxo/store/CorruptFile")("CorruptFile", {
  path: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return clipSentence(`${this.path} cannot be read: ${this.reason}`)
  }
}

/**
 * A session's history journal (`messages.journal`) with a bad record that is not its last line (a
 * torn last line is what a crash leaves, and is left out). Names the file and the line; nothing is
 * changed. The lines before it are good records; the rest is for a person to repair.
 */
export class HistoryJournalCorrupt extends Schema.TaggedError<HistoryJournalCorrupt>(
  "@ctxo/store/HistoryJournalCorrupt"
)("HistoryJournalCorrupt", { path: Schema.String, line: Schema.Int, reason: Schema.String }) {
  override get message() {
    return clipSentence(`History journal ${this.path} is corrupt at line ${this.line}: ${this.reason}`)
  }
}

export type StoreError =
  | SessionNotFound
  | RunNotFound
  | SessionExists
  | FileNotFound
  | PathRefused
  | VersionConflict
  | InvalidRange
  | CorruptFile
  | HistoryJournalCorrupt
  | StoreIOError
