/**
 * The scenario format `ctxo.scenario/v1`: many sessions of one or more tenants played step by step
 * through the real services (`ScenarioRun`), what `pnpm eval` replays from
 * `fixtures/scenarios/*.json` and checks with `ScenarioInvariants`. A JSON Schema of it is published
 * next to this package (`scenario.schema.json`).
 *
 * A scenario is a data root to start from (a copy of a folder such as `fixtures/data`, files written
 * over it), sessions to create (id, concept, metadata, tenant, files), then ordered steps:
 *
 * | step | what it does |
 * |---|---|
 * | `chat` | a turn of a session: the input, and the model's replies as the replay harness scripts them (assistant words, tool calls, tool results) |
 * | `pause`, `resume`, `end` | the session's lifecycle (an ended session's memory is persisted by the event bus) |
 * | `addTask`, `updateTask` | a session's tasks (`as` names a task for later steps) |
 * | `distribute` | one task to many sessions: `broadcast` or `filtered` (metadata pairs, concept) |
 * | `aggregate` | many sessions' contexts into one agent's request for a query |
 * | `pinMemory`, `deleteMemory` | an entry of a memory level, by session and turn (L1, L2) or by its text (L3, L4) |
 * | `persist` | agent-level memory (L3) to global memory (L4) now |
 * | `restart` | new services on the same data directory, optionally later (`advanceMs`) |
 * | `createSession` | a session created mid-scenario |
 * | `run` | a plan-execute-reflect run of a session (seed 004): the goal, the model's answers per role (judge, planner, replanner, reflector, answerer) and each specialist's replies by step id |
 *
 * Every step acts as a tenant (`tenant`, default `default`); a session named by a step is that
 * tenant's. A step may `expect` an error (its tag): anything else is a step that must succeed.
 * `chat` may also say whether the turn is `important` (it must reach L2, or must not) and which
 * texts its first request must draw from global memory (`fromL4`).
 */
import { describeParseError } from "@ctxo/store/DecodeError"
import { SESSION_ID } from "@ctxo/store/Paths"
import { Either, JSONSchema, Schema } from "effect"
import { Policy, Step } from "./Session.ts"

export const SCENARIO_FORMAT = "ctxo.scenario/v1"
export const DEFAULT_TENANT = "default"

const Name = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, {
    message: () => "a name is letters, digits, '.', '_' or '-', starting with a letter or digit"
  })
)
const SessionId = Schema.String.pipe(
  Schema.pattern(SESSION_ID, {
    message: () => "a session id is 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"
  })
)
const Tenant = Name.annotations({ description: "The tenant the step acts as (default: default)" })
const Files = Schema.Record({ key: Schema.String, value: Schema.String })
const Metadata = Schema.Record({ key: Schema.String, value: Schema.String })

/** What a step expects besides succeeding: the tag of the error it must fail with. */
const ExpectError = {
  error: Schema.optional(
    Schema.String.annotations({
      description: "The step must fail with this error tag (SessionNotActive, SessionNotFound, ...)"
    })
  )
}

export const Data = Schema.Struct({
  /** A folder to copy (relative to the repository), e.g. `fixtures/data`. */
  from: Schema.optional(Schema.String),
  /** Files written over it, by path from the data root (`system-prompt.md`, `<session>/notes.md`). */
  files: Schema.optional(Files)
})
export type Data = typeof Data.Type

export const NewSession = Schema.Struct({
  id: SessionId,
  concept: Schema.String,
  metadata: Schema.optional(Metadata),
  tenant: Schema.optional(Tenant),
  /** The session's files (its `context-config.json`, notes, skills). */
  files: Schema.optional(Files),
  /** A `context-config.json` written for it (default: the policy and the global system prompt). */
  manifest: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  policy: Schema.optional(Policy)
})
export type NewSession = typeof NewSession.Type

const sessionStep = <T extends string>(type: T) =>
  Schema.Struct({
    type: Schema.Literal(type),
    session: SessionId,
    tenant: Schema.optional(Tenant),
    expect: Schema.optional(Schema.Struct(ExpectError))
  })

export const ChatStep = Schema.Struct({
  type: Schema.Literal("chat"),
  session: SessionId,
  tenant: Schema.optional(Tenant),
  input: Schema.String,
  /** The model's answers, scripted as in `ctxo.session/v1`: words, tool calls, tool results. */
  replies: Schema.Array(Step).pipe(Schema.minItems(1)),
  expect: Schema.optional(
    Schema.Struct({
      ...ExpectError,
      /** The turn is worth remembering (it must be in L2 after the turn), or small talk (it must not). */
      important: Schema.optional(Schema.Boolean),
      /** Texts the turn's first request must draw from L4 memory (an L4 entry holding each). */
      fromL4: Schema.optional(Schema.Array(Schema.String.pipe(Schema.minLength(1))))
    })
  )
})
export type ChatStep = typeof ChatStep.Type

export const PauseStep = sessionStep("pause")
export const ResumeStep = sessionStep("resume")
export const EndStep = sessionStep("end")

export const AddTaskStep = Schema.Struct({
  type: Schema.Literal("addTask"),
  session: SessionId,
  tenant: Schema.optional(Tenant),
  title: Schema.String,
  description: Schema.optional(Schema.String),
  /** A name later steps use for this task (`updateTask.task`). */
  as: Schema.optional(Name),
  expect: Schema.optional(Schema.Struct(ExpectError))
})

export const UpdateTaskStep = Schema.Struct({
  type: Schema.Literal("updateTask"),
  session: SessionId,
  tenant: Schema.optional(Tenant),
  /** The name an `addTask` gave it. */
  task: Name,
  status: Schema.optional(Schema.Literal("pending", "in_progress", "done", "cancelled")),
  title: Schema.optional(Schema.String),
  expect: Schema.optional(Schema.Struct(ExpectError))
})

export const DistributeStep = Schema.Struct({
  type: Schema.Literal("distribute"),
  tenant: Schema.optional(Tenant),
  mode: Schema.Literal("broadcast", "filtered"),
  task: Schema.Struct({ title: Schema.String, description: Schema.optional(Schema.String) }),
  /** The sessions considered (default: every session of the tenant); may name unknown ones. */
  sessions: Schema.optional(Schema.Array(Schema.String)),
  filter: Schema.optional(
    Schema.Struct({ metadata: Schema.optional(Metadata), concept: Schema.optional(Schema.String) })
  ),
  fromSession: Schema.optional(Schema.String),
  idempotencyKey: Schema.optional(Schema.String),
  expect: Schema.optional(Schema.Struct(ExpectError))
})
export type DistributeStep = typeof DistributeStep.Type

export const AggregateStep = Schema.Struct({
  type: Schema.Literal("aggregate"),
  tenant: Schema.optional(Tenant),
  /** May name sessions the tenant does not have (another tenant's): the aggregate must refuse them. */
  sessions: Schema.Array(Schema.String).pipe(Schema.minItems(1)),
  query: Schema.String.pipe(Schema.minLength(1)),
  /** The agent's model (default: the profile's). */
  model: Schema.optional(Schema.String),
  format: Schema.optional(Schema.Literal("openai", "anthropic", "react")),
  expect: Schema.optional(Schema.Struct(ExpectError))
})
export type AggregateStep = typeof AggregateStep.Type

const memoryStep = <T extends string>(type: T) =>
  Schema.Struct({
    type: Schema.Literal(type),
    tenant: Schema.optional(Tenant),
    level: Schema.Literal("L1", "L2", "L3", "L4"),
    /** L1 and L2: the session and the turn (its number in the session's history). */
    session: Schema.optional(SessionId),
    turn: Schema.optional(Schema.Int.pipe(Schema.positive())),
    /** L3 and L4: the one entry whose text contains this. */
    matching: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
    expect: Schema.optional(Schema.Struct(ExpectError))
  })

export const PinMemoryStep = Schema.Struct({
  ...memoryStep("pinMemory").fields,
  /** False unpins (default: pin). */
  pinned: Schema.optional(Schema.Boolean)
})
export const DeleteMemoryStep = memoryStep("deleteMemory")
export type MemoryStep = typeof PinMemoryStep.Type | typeof DeleteMemoryStep.Type

export const PersistStep = Schema.Struct({
  type: Schema.Literal("persist"),
  tenant: Schema.optional(Tenant),
  /** Only the L3 entries this session contributed to (default: all of L3). */
  session: Schema.optional(SessionId),
  expect: Schema.optional(Schema.Struct(ExpectError))
})

export const RestartStep = Schema.Struct({
  type: Schema.Literal("restart"),
  /** Time that passes while the services are down (memory lifetimes run on it). */
  advanceMs: Schema.optional(Schema.Int.pipe(Schema.nonNegative()))
})

export const CreateSessionStep = Schema.Struct({
  type: Schema.Literal("createSession"),
  ...NewSession.fields,
  expect: Schema.optional(Schema.Struct(ExpectError))
})

/** A role's answer: words as the model wrote them, or a JSON value (written as JSON). */
const RoleReply = Schema.Union(Schema.String, Schema.Record({ key: Schema.String, value: Schema.Unknown }))

export const RunStep = Schema.Struct({
  type: Schema.Literal("run"),
  session: SessionId,
  tenant: Schema.optional(Tenant),
  goal: Schema.String.pipe(Schema.minLength(1)),
  /** The same key as an earlier run step resumes (or replays) that run. */
  idempotencyKey: Schema.optional(Schema.String),
  limits: Schema.optional(
    Schema.Struct({
      maxReflections: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
      maxSteps: Schema.optional(Schema.Int.pipe(Schema.positive())),
      specialistBudget: Schema.optional(Schema.Int.pipe(Schema.positive()))
    })
  ),
  /** The model's answers, in the order each role is asked; a role asked past its list fails the run. */
  model: Schema.Struct({
    judge: Schema.optional(Schema.Array(RoleReply)),
    planner: Schema.optional(Schema.Array(RoleReply)),
    replanner: Schema.optional(Schema.Array(RoleReply)),
    reflector: Schema.optional(Schema.Array(RoleReply)),
    answerer: Schema.optional(Schema.Array(RoleReply)),
    /** Each specialist's replies by step id, scripted as a chat's (words, tool calls, tool results). */
    specialists: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Array(Step) }))
  }),
  expect: Schema.optional(
    Schema.Struct({
      ...ExpectError,
      complexity: Schema.optional(Schema.Literal("simple", "complex")),
      /** The phases the run goes through, in order (from `start`). */
      phases: Schema.optional(Schema.Array(Schema.String)),
      /** Plans made (the first and each adjustment). */
      plans: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
      reflections: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
      /** Step ids that must have a result. */
      results: Schema.optional(Schema.Array(Schema.String))
    })
  )
})
export type RunStep = typeof RunStep.Type

export const ScenarioStep = Schema.Union(
  ChatStep,
  PauseStep,
  ResumeStep,
  EndStep,
  AddTaskStep,
  UpdateTaskStep,
  DistributeStep,
  AggregateStep,
  PinMemoryStep,
  DeleteMemoryStep,
  PersistStep,
  RestartStep,
  CreateSessionStep,
  RunStep
)
export type ScenarioStep = typeof ScenarioStep.Type

export const Scenario = Schema.Struct({
  $schema: Schema.optional(Schema.String),
  format: Schema.Literal(SCENARIO_FORMAT),
  id: Name,
  description: Schema.String,
  data: Schema.optional(Data),
  /** Other tenants' data roots to start from (default: empty). */
  tenants: Schema.optional(Schema.Record({ key: Name, value: Data })),
  sessions: Schema.Array(NewSession),
  steps: Schema.Array(ScenarioStep).pipe(Schema.minItems(1))
})
export type Scenario = typeof Scenario.Type

export class InvalidScenario extends Schema.TaggedError<InvalidScenario>("@ctxo/replay/InvalidScenario")(
  "InvalidScenario",
  { file: Schema.String, reason: Schema.String }
) {
  override get message() {
    return `Invalid scenario ${this.reason}`
  }
}

const decode = Schema.decodeUnknownEither(Schema.parseJson(Scenario), { onExcessProperty: "error" })

/** The step types, in the order the format lists them. */
export const STEP_TYPES: ReadonlyArray<ScenarioStep["type"]> = ScenarioStep.members.map(
  (m) => m.fields.type.literals[0]
)

/** A step whose `type` is none of the format's (the schema alone would say "one of the allowed forms"). */
const unknownStepType = (text: string): string | undefined => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    return undefined
  }
  const steps = (json as { steps?: unknown } | null)?.steps
  if (!Array.isArray(steps)) return undefined
  for (const [i, step] of steps.entries()) {
    const type = (step as { type?: unknown } | null)?.type
    if (typeof type === "string" && !(STEP_TYPES as ReadonlyArray<string>).includes(type))
      return `steps[${i}].type: expected one of ${STEP_TYPES.join(", ")}, got ${JSON.stringify(type.slice(0, 40))}`
  }
  return undefined
}

const tenantOf = (x: { readonly tenant?: string | undefined }) => x.tenant ?? DEFAULT_TENANT

/**
 * What the schema cannot say: a step naming a session must name one created before it in its
 * tenant (the example data's sessions of `data.from` count as created); a task must be named by an
 * `addTask` before an `updateTask` uses it; a memory step addresses L1/L2 by session and turn and
 * L3/L4 by `matching`. Aggregates and distributions may list any id (unknown ones are the point).
 * The first problem as `path: problem`.
 */
export const referenceProblem = (
  scenario: Scenario,
  existing: (tenant: string) => ReadonlyArray<string> = () => []
): string | undefined => {
  const known = new Map<string, Set<string>>()
  const add = (tenant: string, id: string) => {
    const set = known.get(tenant) ?? new Set(existing(tenant))
    set.add(id)
    known.set(tenant, set)
  }
  const has = (tenant: string, id: string) => (known.get(tenant) ?? new Set(existing(tenant))).has(id)
  for (const [i, s] of scenario.sessions.entries()) {
    if (has(tenantOf(s), s.id))
      return `sessions[${i}].id: session ${s.id} is created twice in tenant ${tenantOf(s)}`
    add(tenantOf(s), s.id)
  }
  const tasks = new Set<string>()
  for (const [i, step] of scenario.steps.entries()) {
    const at = `steps[${i}]`
    const tenant = "tenant" in step ? tenantOf(step) : DEFAULT_TENANT
    const missing = (id: string) =>
      `${at}.session: no session ${id} of tenant ${tenant} is created before this step`
    switch (step.type) {
      case "createSession":
        if (has(tenant, step.id)) return `${at}.id: session ${step.id} is created twice in tenant ${tenant}`
        add(tenant, step.id)
        break
      case "chat":
      case "pause":
      case "resume":
      case "end":
      case "addTask":
        if (!has(tenant, step.session)) return missing(step.session)
        if (step.type === "addTask" && step.as !== undefined) {
          if (tasks.has(step.as)) return `${at}.as: a task is already named ${step.as}`
          tasks.add(step.as)
        }
        break
      case "updateTask":
        if (!has(tenant, step.session)) return missing(step.session)
        if (!tasks.has(step.task))
          return `${at}.task: no addTask before this step names a task ${step.task} (give it "as": "${step.task}")`
        if (step.status === undefined && step.title === undefined)
          return `${at}: an updateTask changes the status or the title`
        break
      case "pinMemory":
      case "deleteMemory":
        if (step.level === "L1" || step.level === "L2") {
          if (step.session === undefined || step.turn === undefined)
            return `${at}.${step.session === undefined ? "session" : "turn"}: an ${step.level} entry is addressed by its session and turn`
          if (!has(tenant, step.session)) return missing(step.session)
        } else if (step.matching === undefined)
          return `${at}.matching: an ${step.level} entry is addressed by a text it contains`
        break
      case "persist":
        if (step.session !== undefined && !has(tenant, step.session)) return missing(step.session)
        break
      case "distribute":
        if (step.mode === "filtered" && step.filter === undefined)
          return `${at}.filter: mode filtered needs a filter (metadata pairs and/or a concept)`
        break
      case "aggregate":
      case "restart":
        break
    }
  }
  return undefined
}

/**
 * Parses a scenario file's text: the format, then the references between steps. An error is one
 * sentence naming the file and the field (`steps[3].session: expected string, got 5`).
 * `existing` lists the sessions a tenant's starting data already has (`data.from`).
 */
export const parseScenario = (
  text: string,
  file: string,
  existing?: (tenant: string) => ReadonlyArray<string>
): Either.Either<Scenario, InvalidScenario> => {
  const unknown = unknownStepType(text)
  if (unknown !== undefined) return Either.left(new InvalidScenario({ file, reason: `${file}: ${unknown}` }))
  return Either.flatMap(
    Either.mapLeft(
      decode(text),
      (error) => new InvalidScenario({ file, reason: describeParseError(error, file) })
    ),
    (scenario) => {
      const problem = referenceProblem(scenario, existing)
      return problem === undefined
        ? Either.right(scenario)
        : Either.left(new InvalidScenario({ file, reason: `${file}: ${problem}` }))
    }
  )
}

/** The published JSON Schema of `ctxo.scenario/v1`. */
export const scenarioJsonSchema = () => ({
  title: "ctxo multi-session scenario (ctxo.scenario/v1)",
  ...JSONSchema.make(Scenario)
})
