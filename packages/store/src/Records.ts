/**
 * What the store keeps as data, with its schemas: the session records of `sessions.json`, a
 * session's tasks (`<session>/tasks.json`) and the task distributions (`distributions.json`).
 * Pure: the store decodes and writes these; the HTTP contract answers with them.
 *
 * Session records written before lifecycle states existed (`{ id, concept, createdAt }`) read as
 * `active`, changed at their creation, with no metadata; the next write of the index writes them
 * whole.
 */
import { Either, Schema } from "effect"
import { problemOf } from "./DecodeError.ts"
import { CorruptFile } from "./StoreErrors.ts"

/**
 * Where a session is in its life: `active` takes turns; `paused` takes none until it is resumed
 * (its files, tasks and previews stay available); `ended` is final.
 */
export const SessionState = Schema.Literal("active", "paused", "ended").annotations({
  identifier: "SessionState",
  description:
    "active: takes turns; paused: takes no turn until resumed (files, tasks and previews stay); ended: final"
})
export type SessionState = typeof SessionState.Type

/** A key of session metadata: 1-64 letters, digits, `.`, `_`, `:` or `-`, starting with a letter or digit. */
export const MetadataKey = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/, {
    message: () =>
      "a metadata key is 1-64 letters, digits, '.', '_', ':' or '-', starting with a letter or digit"
  })
)
export const MAX_METADATA_KEYS = 64
export const MAX_METADATA_VALUE = 512

/** A value of session metadata: at most 512 characters. */
export const MetadataValue = Schema.String.pipe(Schema.maxLength(MAX_METADATA_VALUE))

/** Metadata as a creator sets it: a flat record of strings, at most 64 keys. */
export const SessionMetadata = Schema.Record({ key: MetadataKey, value: MetadataValue }).pipe(
  Schema.filter((record) => Object.keys(record).length <= MAX_METADATA_KEYS, {
    message: () => `at most ${MAX_METADATA_KEYS} metadata keys`
  }),
  Schema.annotations({ identifier: "SessionMetadata" })
)

export const SessionRecord = Schema.Struct({
  id: Schema.String,
  concept: Schema.String,
  createdAt: Schema.String,
  state: SessionState,
  /** When `state` last changed (its creation, for a session never paused or ended). */
  stateChangedAt: Schema.String.annotations({
    description: "When state last changed (ISO 8601; the creation time until the first change)"
  }),
  /** What distribution filters select on (`{ "team": "physics" }`). */
  metadata: Schema.Record({ key: Schema.String, value: Schema.String }).annotations({
    description: 'Flat string metadata, what filtered distributions select on ({ "team": "physics" })'
  })
}).annotations({ identifier: "SessionRecord" })
export type SessionRecord = typeof SessionRecord.Type

/** A record of `sessions.json` as it may be on disk: the lifecycle fields are recent. */
const IndexEntry = Schema.Struct({
  id: Schema.String,
  concept: Schema.String,
  createdAt: Schema.String,
  state: Schema.optional(SessionState),
  stateChangedAt: Schema.optional(Schema.String),
  metadata: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String }))
})

/** `sessions.json`: a JSON array of records, older ones completed (active, no metadata). */
export const SessionIndex = Schema.transform(
  Schema.parseJson(Schema.Array(IndexEntry)),
  Schema.Array(SessionRecord),
  {
    strict: true,
    decode: (entries) =>
      entries.map(
        (e): SessionRecord => ({
          id: e.id,
          concept: e.concept,
          createdAt: e.createdAt,
          state: e.state ?? "active",
          stateChangedAt: e.stateChangedAt ?? e.createdAt,
          metadata: e.metadata ?? {}
        })
      ),
    encode: (records) => records
  }
)

export const TaskStatus = Schema.Literal("pending", "in_progress", "done", "cancelled").annotations({
  identifier: "TaskStatus",
  description: "A new task is pending; any status may follow any other"
})
export type TaskStatus = typeof TaskStatus.Type

/** Where a task came from: the distribution that added it, and the session that produced it. */
export const TaskOrigin = Schema.Struct({
  distributionId: Schema.String,
  fromSession: Schema.optionalWith(Schema.String, { exact: true })
}).annotations({ identifier: "TaskOrigin" })
export type TaskOrigin = typeof TaskOrigin.Type

export const Task = Schema.Struct({
  id: Schema.String,
  title: Schema.String,
  description: Schema.optionalWith(Schema.String, { exact: true }),
  status: TaskStatus,
  createdAt: Schema.String,
  updatedAt: Schema.String,
  origin: Schema.optionalWith(TaskOrigin, { exact: true })
}).annotations({ identifier: "Task" })
export type Task = typeof Task.Type

/** `<session>/tasks.json`: a JSON array of tasks, oldest first. */
export const TaskList = Schema.parseJson(Schema.Array(Task))

export const DistributionMode = Schema.Literal("broadcast", "filtered").annotations({
  identifier: "DistributionMode"
})
export type DistributionMode = typeof DistributionMode.Type

/**
 * Which sessions a `filtered` distribution selects: every metadata pair equal (all of them), and
 * the concept containing `concept` (case-insensitive). At least one of the two.
 */
export const DistributionFilter = Schema.Struct({
  metadata: Schema.optionalWith(
    Schema.Record({ key: Schema.String, value: Schema.String }).annotations({
      description: "Every pair must be in the session's metadata"
    }),
    { exact: true }
  ),
  concept: Schema.optionalWith(
    Schema.String.annotations({ description: "The session's concept contains it (case-insensitive)" }),
    { exact: true }
  )
}).annotations({ identifier: "DistributionFilter" })
export type DistributionFilter = typeof DistributionFilter.Type

/** Why a session did not receive a distributed task. */
export const SkipReason = Schema.Literal("ended", "not_found", "not_matched").annotations({
  identifier: "SkipReason",
  description:
    "ended: the session is ended; not_found: a listed session this data root (tenant) does not have; not_matched: a listed session the filter leaves out"
})
export type SkipReason = typeof SkipReason.Type

/** What a distribution did in one session (its result there): the task it added, or why it skipped the session. */
export const DistributionResult = Schema.Union(
  Schema.Struct({ session: Schema.String, taskId: Schema.String }),
  Schema.Struct({ session: Schema.String, skipped: SkipReason, message: Schema.String })
).annotations({ identifier: "DistributionResult" })
export type DistributionResult = typeof DistributionResult.Type

/** A distribution as asked for (kept to tell a retry from another request with the same key). */
export const DistributionRequest = Schema.Struct({
  task: Schema.Struct({
    title: Schema.String,
    description: Schema.optionalWith(Schema.String, { exact: true })
  }),
  mode: DistributionMode,
  sessions: Schema.optionalWith(Schema.Array(Schema.String), { exact: true }),
  filter: Schema.optionalWith(DistributionFilter, { exact: true }),
  fromSession: Schema.optionalWith(Schema.String, { exact: true })
})
export type DistributionRequest = typeof DistributionRequest.Type

/**
 * A distribution of `distributions.json`. It is written before any task is added, with the task id
 * each session will get, then again when every session is done (`complete`): a retry, or a
 * distribution cut short by a crash, adds the same tasks to the same sessions, never twice.
 */
export const Distribution = Schema.Struct({
  id: Schema.String,
  createdAt: Schema.String,
  idempotencyKey: Schema.optionalWith(Schema.String, { exact: true }),
  request: DistributionRequest,
  results: Schema.Array(DistributionResult),
  complete: Schema.Boolean
})
export type Distribution = typeof Distribution.Type

/** `distributions.json`: a JSON array, oldest first. */
export const DistributionLog = Schema.parseJson(Schema.Array(Distribution))

export const MemoryLevel = Schema.Literal("L1", "L2", "L3", "L4").annotations({
  identifier: "MemoryLevel",
  description:
    "L1 session-private recent turns (minutes), L2 the session's important turns (hours), L3 agent-level across sessions (days), L4 global and persistent"
})
export type MemoryLevel = typeof MemoryLevel.Type

/** Where a memory comes from: a session, and the turn when it is one. */
export const MemoryProvenance = Schema.Struct({
  session: Schema.String,
  turn: Schema.optionalWith(Schema.Int, { exact: true })
}).annotations({ identifier: "MemoryProvenance" })
export type MemoryProvenance = typeof MemoryProvenance.Type

/**
 * One memory. L2 entries live in their session's memory.json, L3 and L4 in the root's; an L1
 * entry is a view of a recent turn and is stored only when pinned or deleted (an override).
 * Deleting hides an entry from the views and the sources; it stays on file (`deletedAt`).
 */
export const MemoryEntry = Schema.Struct({
  id: Schema.String,
  level: MemoryLevel,
  text: Schema.String,
  importance: Schema.Number,
  /** The importance rules that fired (`@ctxo/history/Importance`), or how it was built. */
  reasons: Schema.Array(Schema.String),
  sources: Schema.Array(MemoryProvenance),
  createdAt: Schema.String,
  updatedAt: Schema.String,
  pinned: Schema.optionalWith(Schema.Boolean, { exact: true }),
  deletedAt: Schema.optionalWith(Schema.String, { exact: true })
}).annotations({ identifier: "MemoryEntry" })
export type MemoryEntry = typeof MemoryEntry.Type

/** A memory.json: a JSON array of entries. */
export const MemoryFile = Schema.parseJson(Schema.Array(MemoryEntry))

export const decodeWith =
  <A, I>(schema: Schema.Schema<A, I>) =>
  (text: string, file: string): Either.Either<A, CorruptFile> =>
    Either.mapLeft(
      Schema.decodeUnknownEither(schema)(text),
      (e) => new CorruptFile({ path: file, reason: problemOf(e) })
    )

/** A session's tasks.json read (`file` names it in the error). */
export const decodeTasks = decodeWith(TaskList)
/** A memory.json read (a session's, or the root's). */
export const decodeMemory = decodeWith(MemoryFile)
/** distributions.json read. */
export const decodeDistributions = decodeWith(DistributionLog)

/** A JSON file as the store writes it: two-space indented, one trailing newline. */
export const jsonText = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`
