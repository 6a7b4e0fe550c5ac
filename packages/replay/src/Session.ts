/**
 * The recorded session format `ctxo.session/v1`: what the replay harness, `ctxo replay` and the
 * promptfoo suites read from `fixtures/sessions/*.json`, and what the gateway records from real
 * traffic. A JSON Schema of it is published next to this package (`session.schema.json`).
 *
 * A turn is the user's input and the steps the agent took: assistant words (Thought / Action),
 * tool calls, and tool results as the tool returned them (uncompressed: the harness compresses
 * them the way history does). Optional fields exercise what real sessions go through: a crash in
 * the middle of a turn and the client's retry, a restore from a checkpoint, dismissed and pinned
 * memories, and the summary a compaction before the turn would write.
 */
import { Either, JSONSchema, ParseResult, Schema } from "effect"

export const SESSION_FORMAT = "ctxo.session/v1"

export const Policy = Schema.Literal("layered", "code-agent", "notebook")

export const Settings = Schema.Struct({
  /** Whole turns compaction always keeps (default 10). */
  keepTurns: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
  /** Fraction of the window that triggers compaction (default 0.8). */
  triggerRatio: Schema.optional(Schema.Number.pipe(Schema.greaterThan(0), Schema.lessThanOrEqualTo(1))),
  /** The window the compaction trigger uses (default 200,000). */
  contextWindow: Schema.optional(Schema.Int.pipe(Schema.positive()))
})

export const ToolError = Schema.Struct({ code: Schema.optional(Schema.String), message: Schema.String })

export const ToolResult = Schema.Struct({
  status: Schema.Literal("success", "error"),
  data: Schema.optional(Schema.Unknown),
  error: Schema.optional(ToolError),
  text: Schema.optional(Schema.String),
  stats: Schema.optional(Schema.Unknown),
  context: Schema.optional(Schema.Unknown)
})

export const AssistantStep = Schema.Struct({ type: Schema.Literal("assistant"), text: Schema.String })
export const ToolCallStep = Schema.Struct({
  type: Schema.Literal("tool_call"),
  id: Schema.NonEmptyString,
  name: Schema.NonEmptyString,
  input: Schema.Unknown
})
export const ToolResultStep = Schema.Struct({
  type: Schema.Literal("tool_result"),
  callId: Schema.NonEmptyString,
  name: Schema.NonEmptyString,
  result: ToolResult
})
export const Step = Schema.Union(AssistantStep, ToolCallStep, ToolResultStep)
export type Step = typeof Step.Type

/** Something the user or the model does to history before the turn (seed 000 memory curation). */
export const Action = Schema.Union(
  Schema.Struct({
    type: Schema.Literal("dismiss"),
    /** The tool call whose result the model dismisses (`dismiss_memory`). */
    callId: Schema.NonEmptyString,
    summary: Schema.String
  }),
  Schema.Struct({
    type: Schema.Literal("exclude"),
    /** The tool call whose result the user excludes. */
    callId: Schema.NonEmptyString,
    reason: Schema.optional(Schema.String)
  }),
  /** Pins a whole turn (by its input): never compacted. */
  Schema.Struct({ type: Schema.Literal("pin"), turn: Schema.Int.pipe(Schema.positive()) })
)
export type Action = typeof Action.Type

export const Turn = Schema.Struct({
  user: Schema.String,
  steps: Schema.Array(Step),
  /** Tokens the provider reported for the turn's last request: drives the compaction trigger. */
  usage: Schema.optional(
    Schema.Struct({ inputTokens: Schema.Int.pipe(Schema.nonNegative()), outputTokens: Schema.Int })
  ),
  /** The summary to write if compaction fires before this turn (else a deterministic one). */
  summary: Schema.optional(Schema.String),
  /** The client's idempotency key for the input (a retry sends the same key). */
  inputKey: Schema.optional(Schema.String),
  /**
   * The process dies after this many of the turn's steps are recorded (assistant words with the
   * call they make count as one step, a tool result as one); the client sends the same input again.
   */
  crash: Schema.optional(Schema.Struct({ afterStep: Schema.Int.pipe(Schema.nonNegative()) })),
  /** Before this turn, history is restored from the checkpoint taken after turn `toTurn`. */
  restore: Schema.optional(Schema.Struct({ toTurn: Schema.Int.pipe(Schema.nonNegative()) })),
  actions: Schema.optional(Schema.Array(Action))
})
export type Turn = typeof Turn.Type

/** What a profile is expected to do with the session (the gate fails on anything else). */
export const ProfileExpectation = Schema.Struct({
  /** At least this many compiles (a profile with none fails whatever this says). */
  minCompiles: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
  /**
   * Any refusal that the required minimum justifies (it does not fit) is expected: for generated
   * sessions, whose refusals are not known in advance. Unjustified refusals still fail.
   */
  justifiedRefusals: Schema.optional(Schema.Boolean),
  /**
   * Compiles refused with BudgetExceeded on purpose (the required minimum cannot fit): the turn,
   * and the step (tool results before it in the turn; none: any step of the turn). Any other
   * refusal fails the gate.
   */
  refusals: Schema.optional(
    Schema.Array(
      Schema.Struct({
        turn: Schema.Int.pipe(Schema.positive()),
        step: Schema.optional(Schema.Int.pipe(Schema.nonNegative()))
      })
    )
  )
})
export type ProfileExpectation = typeof ProfileExpectation.Type

export const RecordedSession = Schema.Struct({
  $schema: Schema.optional(Schema.String),
  format: Schema.Literal(SESSION_FORMAT),
  id: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._-]*$/)),
  description: Schema.String,
  policy: Policy,
  /** The model the session was recorded with (replays run every profile). */
  model: Schema.String,
  settings: Schema.optional(Settings),
  systemPrompt: Schema.String,
  /** The session's files by path (CODE_LAW.md, sources, knowledge, a tree file, milestones.md). */
  files: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  /** Extra contexts by key (each ends in `__context`). */
  contexts: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  /** Global profile.md (notebook sessions select blocks of it). */
  profile: Schema.optional(Schema.String),
  /**
   * More of the compile manifest (context-config.json): knowledge, profileBlocks, tree,
   * references, todo, process (role, enableShareContext, knowledge). Checked by the compiler.
   */
  manifest: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  turns: Schema.Array(Turn).pipe(Schema.minItems(1)),
  /** Per replay profile (`gpt-4o`, `gpt-4`, `claude-sonnet-4-5`, `gpt-3.5-turbo`): what it must do. */
  expect: Schema.optional(Schema.Record({ key: Schema.String, value: ProfileExpectation })),
  /** Where the session came from (the gateway's recorder fills this in). */
  recordedAt: Schema.optional(Schema.String),
  tenant: Schema.optional(Schema.String)
})
export type RecordedSession = typeof RecordedSession.Type

export class InvalidSession extends Schema.TaggedError<InvalidSession>("@ctxo/replay/InvalidSession")(
  "InvalidSession",
  { file: Schema.String, reason: Schema.String }
) {
  override get message() {
    return `Invalid session ${this.file}: ${this.reason}`
  }
}

const decode = Schema.decodeUnknownEither(Schema.parseJson(RecordedSession), { onExcessProperty: "error" })

/** Parses a session file's text; an error names the file and the first bad field. */
export const parseSession = (text: string, file: string): Either.Either<RecordedSession, InvalidSession> =>
  Either.mapLeft(decode(text), (error) => {
    const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
    const where = issue === undefined || issue.path.length === 0 ? "" : `${issue.path.join(".")}: `
    return new InvalidSession({ file, reason: `${where}${issue?.message ?? error.message}` })
  })

/** The published JSON Schema of `ctxo.session/v1`. */
export const sessionJsonSchema = () => ({
  title: "ctxo recorded session (ctxo.session/v1)",
  ...JSONSchema.make(RecordedSession)
})
