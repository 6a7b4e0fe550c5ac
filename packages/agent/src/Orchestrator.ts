/**
 * The plan-execute-reflect orchestrator of seed 004 (layer three), on the turn engine.
 *
 * A run is one turn of its session: the goal is the turn's input (recorded once) and the final
 * answer its answer (recorded once). Inside that turn, under the session's lock, the seed's state
 * machine runs and writes its `EnhancedState` (`<session>/runs/<runId>.json`) at every transition:
 *
 *   start -> analyze (the session's context, compiled) -> judge (complexity)
 *     simple:  -> answer-directly -> done
 *     complex: -> plan -> execute (each step by a specialist) -> collect -> feedback -> reflect
 *              reflect: finish -> final-answer -> done
 *                       adjust -> update-plan -> execute ...
 *                       continue -> execute (the steps not done yet) ...
 *   any phase that cannot go on (an answer that is not what was asked, an upstream failure) -> failed
 *
 * - The planner, the reflector and the answerer are asked with the session's compiled context plus
 *   the run's meta context (`meta__context`: the goal, the plan with each step's status, the
 *   results, the feedback), cut to its share. The model's words for judge, plan and reflect are
 *   JSON; one that is not is `RunReplyInvalid`, naming the role and the problem.
 * - A specialist is a ReAct agent on its own child session (`<runId>-<stepId>`, metadata `parent`,
 *   `run`, `step`): a turn of that session whose input is the step's instruction and whose context
 *   is the step as a thinking-map node (`tree__context`: the goal as its root, the results of the
 *   steps it depends on as their conclusions, nothing of its siblings), within the run's
 *   specialist budget. A step's result is collected once (a failed or skipped step may run again).
 * - Limits (always an end): at most `maxReflections` reflections (then the answer is written
 *   from what there is), at most `maxSteps` specialist executions (further steps are skipped), and
 *   `specialistBudget` tokens for a specialist's request.
 * - A run that stopped (a crash, a client gone, an upstream failure) resumes from its saved phase
 *   when asked again with the same idempotency key: finished steps are not run again.
 *
 * The model is a seam (`RunModel`): the gateway's asks the upstream (`RunStream`), the replay
 * harness scripts it per role.
 */
import { createHash, randomUUID } from "node:crypto"
import { DEFAULT_OUTPUT_RESERVE_RATIO } from "@ctxo/budget/Allocation"
import type { CompileResult } from "@ctxo/compiler/Compile"
import type { Manifest } from "@ctxo/compiler/Manifest"
import type { MetaContext, MetaItem } from "@ctxo/compiler/MetaContext"
import type { ContextInfo } from "@ctxo/compiler/ThinkingMap"
import type { OfferedTool } from "@ctxo/compiler/ToolSelection"
import type { Usage } from "@ctxo/history/Turns"
import type {
  EnhancedState,
  ExecutionEntry,
  Plan,
  PlanStep,
  ReflectionDecision,
  RunLimits,
  RunPhase
} from "@ctxo/store/Runs"
import { RUN_FORMAT } from "@ctxo/store/Runs"
import { MANIFEST_FILE, Store } from "@ctxo/store/Store"
import type { StoreError } from "@ctxo/store/StoreErrors"
import { Effect, Either, Option, Schema } from "effect"
import {
  type Driver,
  type StepContext,
  TurnEngine,
  type TurnError,
  type TurnEvent,
  type TurnOptions
} from "./TurnEngine.ts"

/** Who the orchestrator asks. */
export type RunRole = "judge" | "planner" | "replanner" | "reflector" | "answerer"

/** The default limits (the gateway's CTXO_RUN_* override them). */
export const DEFAULT_LIMITS: RunLimits = { maxReflections: 3, maxSteps: 8, specialistBudget: 8_000 }

/** Steps a plan may have (a longer one is refused as not a plan). */
export const MAX_PLAN_STEPS = 20

const STEP_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$/

/** The model of a run: the orchestrator's own questions, and each specialist's driver. */
export interface RunModel<E, R> {
  /** Answers a role's request (the session's context with the run's meta context), as text. */
  readonly ask: (
    role: RunRole,
    compiled: CompileResult,
    step: StepContext
  ) => Effect.Effect<{ readonly text: string; readonly usage?: Usage }, E, R>
  /** The driver of a specialist's turn on its child session (the model and the tools it runs). */
  readonly specialist: (request: {
    readonly childSession: string
    readonly step: PlanStep
    readonly state: EnhancedState
  }) => Effect.Effect<Driver<E, R>, never, R>
}

export type RunEvent =
  | { readonly type: "run"; readonly runId: string; readonly sessionId: string; readonly resumed: boolean }
  | { readonly type: "transition"; readonly from: RunPhase; readonly to: RunPhase; readonly version: number }
  | { readonly type: "complexity"; readonly complexity: "simple" | "complex"; readonly reason: string }
  | { readonly type: "plan"; readonly plan: Plan }
  | {
      readonly type: "step-started"
      readonly stepId: string
      readonly title: string
      readonly childSession: string
    }
  | {
      readonly type: "step-finished"
      readonly stepId: string
      readonly childSession: string
      readonly result: string
      readonly contextTokens: number
    }
  | { readonly type: "step-failed"; readonly stepId: string; readonly message: string }
  | { readonly type: "step-skipped"; readonly stepId: string; readonly reason: string }
  | { readonly type: "feedback"; readonly round: number; readonly notes: ReadonlyArray<string> }
  | {
      readonly type: "reflection"
      readonly round: number
      readonly decision: ReflectionDecision
      readonly feedback: string
      readonly forced?: string
    }
  | { readonly type: "text-delta"; readonly text: string }
  | {
      readonly type: "done"
      readonly runId: string
      readonly turn: number
      readonly text: string
      readonly replayed: boolean
    }
  | { readonly type: "error"; readonly tag: string; readonly message: string }
  | Extract<
      TurnEvent,
      {
        readonly type:
          | "turn"
          | "compaction-started"
          | "compaction-finished"
          | "compaction-fell-back"
          | "usage"
      }
    >

export interface RunRequest {
  readonly sessionId: string
  readonly goal: string
  readonly model?: string
  /** The same key resumes the run (or answers a finished one); without one, a new run. */
  readonly idempotencyKey?: string
}

export interface RunOptions {
  /** The model when neither the request nor the session's manifest names one. */
  readonly defaultModel: string
  readonly limits: RunLimits
  /** Tool steps of a specialist's turn. */
  readonly maxToolSteps: number
  /** The tools specialists may run (offered on demand, as in a chat). */
  readonly tools?: ReadonlyArray<OfferedTool>
  readonly emit?: (event: RunEvent) => Effect.Effect<void>
  /** Each specialist's first compiled request, as it is made (replay checks what it holds). */
  readonly onSpecialistCompiled?: (stepId: string, compiled: CompileResult) => Effect.Effect<void>
  /** Each request of the orchestrator's own roles, as it is made. */
  readonly onAsked?: (role: RunRole, compiled: CompileResult) => Effect.Effect<void>
}

/** A role's answer that is not what it was asked for (not JSON, or JSON of another shape). */
export class RunReplyInvalid extends Schema.TaggedError<RunReplyInvalid>("@ctxo/agent/RunReplyInvalid")(
  "RunReplyInvalid",
  { role: Schema.String, reason: Schema.String }
) {
  override get message() {
    return `The ${this.role}'s answer is not usable: ${this.reason}`
  }
}

/** A run asked for a turn (or a child session) another run owns. */
export class RunTurnTaken extends Schema.TaggedError<RunTurnTaken>("@ctxo/agent/RunTurnTaken")(
  "RunTurnTaken",
  {
    sessionId: Schema.String,
    turn: Schema.Int,
    runId: Schema.String
  }
) {
  override get message() {
    return `Turn ${this.turn} of session ${this.sessionId} belongs to run ${this.runId}, which has not finished: resume it with its idempotency key, or start this run with another goal`
  }
}

/** A specialist's session id is taken by a session that is not that run's specialist. */
export class SpecialistSessionTaken extends Schema.TaggedError<SpecialistSessionTaken>(
  "@ctxo/agent/SpecialistSessionTaken"
)("SpecialistSessionTaken", { sessionId: Schema.String, runId: Schema.String }) {
  override get message() {
    return `Session ${this.sessionId} exists and is not a specialist of run ${this.runId}: it is not used`
  }
}

/** The unfinished run, other than `runId`, that answers `turn` of the session. */
const ownerOf = (store: Store["Type"], sessionId: string, turn: number, runId: string) =>
  Effect.gen(function* () {
    for (const id of yield* store.listRuns(sessionId)) {
      if (id === runId) continue
      const other = yield* store.readRun(sessionId, id)
      if (other.turn === turn && other.phase !== "done") return id
    }
    return undefined
  })

/** The run id of a request: derived from its idempotency key (so a retry finds it), else new. */
export const runIdOf = (sessionId: string, idempotencyKey: string | undefined): string =>
  idempotencyKey === undefined
    ? `r-${randomUUID().replace(/-/g, "").slice(0, 16)}`
    : `r-${createHash("sha256").update(`${sessionId}\u0000${idempotencyKey}`).digest("hex").slice(0, 16)}`

/** The legal transitions of the state machine (`failed` may follow any phase, and resume it). */
export const TRANSITIONS: Readonly<Record<RunPhase, ReadonlyArray<RunPhase>>> = {
  start: ["analyze"],
  analyze: ["judge"],
  judge: ["answer-directly", "plan"],
  "answer-directly": ["done"],
  plan: ["execute"],
  execute: ["collect"],
  collect: ["feedback"],
  feedback: ["reflect"],
  reflect: ["final-answer", "update-plan", "execute"],
  "update-plan": ["execute"],
  "final-answer": ["done"],
  done: [],
  failed: []
}

// --- the answers asked of the model (JSON)

const Judgement = Schema.Struct({
  complexity: Schema.Literal("simple", "complex"),
  reason: Schema.optionalWith(Schema.String, { default: () => "" })
})
const PlanReply = Schema.Struct({
  steps: Schema.Array(
    Schema.Struct({
      id: Schema.optional(Schema.String),
      title: Schema.String,
      instruction: Schema.optional(Schema.String),
      dependsOn: Schema.optional(Schema.Array(Schema.String))
    })
  ),
  rationale: Schema.optional(Schema.String)
})
const Reflection = Schema.Struct({
  decision: Schema.Literal("continue", "adjust", "finish"),
  feedback: Schema.optionalWith(Schema.String, { default: () => "" })
})

/** The JSON object in a model's words (fenced or not), decoded; or why not. */
export const parseReply = <A, I>(
  role: RunRole,
  text: string,
  schema: Schema.Schema<A, I>
): Either.Either<A, RunReplyInvalid> => {
  const fail = (reason: string) => Either.left(new RunReplyInvalid({ role, reason }))
  const start = text.indexOf("{")
  const end = text.lastIndexOf("}")
  if (start === -1 || end < start)
    return fail(`expected a JSON object, got ${JSON.stringify(text.slice(0, 80))}`)
  let json: unknown
  try {
    json = JSON.parse(text.slice(start, end + 1))
  } catch (e) {
    return fail(`its JSON does not parse (${e instanceof Error ? e.message : String(e)})`)
  }
  return Either.mapLeft(
    Schema.decodeUnknownEither(schema)(json, { errors: "first" }),
    (e) => new RunReplyInvalid({ role, reason: e.message.split("\n").slice(0, 3).join(" ") })
  )
}

/**
 * A plan from the planner's words: ids given or `s1`, `s2`, ...; ids unique and simple; every
 * dependency a step of the plan; no cycle; 1 to `MAX_PLAN_STEPS` steps.
 */
export const planOf = (
  role: RunRole,
  text: string,
  version: number,
  at: string
): Either.Either<Plan, RunReplyInvalid> =>
  Either.flatMap(parseReply(role, text, PlanReply), (reply) => {
    const fail = (reason: string) => Either.left(new RunReplyInvalid({ role, reason }))
    if (reply.steps.length === 0) return fail("the plan has no steps")
    if (reply.steps.length > MAX_PLAN_STEPS)
      return fail(`the plan has ${reply.steps.length} steps; at most ${MAX_PLAN_STEPS}`)
    const steps: Array<PlanStep> = reply.steps.map((s, i) => ({
      id: s.id ?? `s${i + 1}`,
      title: s.title,
      instruction: s.instruction ?? s.title,
      dependsOn: [...(s.dependsOn ?? [])]
    }))
    const ids = new Set<string>()
    for (const [i, s] of steps.entries()) {
      if (!STEP_ID.test(s.id))
        return fail(
          `steps[${i}].id ${JSON.stringify(s.id.slice(0, 40))} is not 1-32 letters, digits, '_' or '-'`
        )
      if (ids.has(s.id)) return fail(`steps[${i}].id "${s.id}" is used twice`)
      ids.add(s.id)
    }
    for (const [i, s] of steps.entries())
      for (const d of s.dependsOn)
        if (!ids.has(d))
          return fail(`steps[${i}] ("${s.id}") depends on "${d.slice(0, 40)}", which is not a step`)
    if (orderOf(steps) === undefined) return fail("the steps' dependencies form a cycle")
    return Either.right({
      version,
      steps,
      ...(reply.rationale === undefined ? {} : { rationale: reply.rationale }),
      createdAt: at
    })
  })

/** The steps in an order where each comes after those it depends on (stable); undefined on a cycle. */
export const orderOf = (steps: ReadonlyArray<PlanStep>): ReadonlyArray<PlanStep> | undefined => {
  const out: Array<PlanStep> = []
  const placed = new Set<string>()
  while (out.length < steps.length) {
    const next = steps.find((s) => !placed.has(s.id) && s.dependsOn.every((d) => placed.has(d)))
    if (next === undefined) return undefined
    out.push(next)
    placed.add(next.id)
  }
  return out
}

// --- what each role sees (the meta context) and what a specialist sees (its node)

const statusLine = (state: EnhancedState, s: PlanStep) =>
  `- ${s.id} [${state.executionStatus[s.id] ?? "pending"}] ${s.title}${
    s.dependsOn.length === 0 ? "" : ` (after ${s.dependsOn.join(", ")})`
  }${s.instruction === s.title ? "" : `: ${s.instruction}`}`

const INSTRUCTIONS: Readonly<Record<RunRole, (limits: RunLimits) => string>> = {
  judge: () =>
    [
      "[ctxo run: judge]",
      "You decide how to handle the goal (the user's last message): answer it directly when one answer can do it, or plan steps for specialists when it needs several pieces of work.",
      'Answer with JSON only: {"complexity": "simple" | "complex", "reason": "<one sentence>"}'
    ].join("\n"),
  planner: (limits) =>
    [
      "[ctxo run: plan]",
      `You are the planner. Break the goal into at most ${limits.maxSteps} steps, each done by a specialist who sees only its step and the results of the steps it depends on.`,
      'Answer with JSON only: {"steps": [{"id": "s1", "title": "<short>", "instruction": "<what the specialist must do>", "dependsOn": []}], "rationale": "<one sentence>"}'
    ].join("\n"),
  replanner: (limits) =>
    [
      "[ctxo run: replan]",
      `You are the planner, adjusting the plan after a reflection. Keep a finished step by giving it again with the same id and instruction (it is not run again); give new steps new ids. At most ${limits.maxSteps} steps.`,
      'Answer with JSON only: {"steps": [{"id": "...", "title": "...", "instruction": "...", "dependsOn": []}], "rationale": "<what changed and why>"}'
    ].join("\n"),
  reflector: (limits) =>
    [
      "[ctxo run: reflect]",
      `You are the reflector. Judge the results against the goal: finish when they answer it, adjust the plan when they do not, continue when steps are still pending. Reflections left: ${limits.maxReflections}.`,
      'Answer with JSON only: {"decision": "finish" | "adjust" | "continue", "feedback": "<one or two sentences>"}'
    ].join("\n"),
  answerer: () =>
    [
      "[ctxo run: answer]",
      "Write the final answer to the goal for the user, from the specialists' results below (when there are none, answer the goal directly). Plain prose, no JSON."
    ].join("\n")
}

/** The meta context a role is asked with: its instructions, the goal, the plan, results, feedback. */
export const metaContextOf = (role: RunRole, state: EnhancedState): MetaContext => {
  const reflectionsLeft = Math.max(0, state.limits.maxReflections - state.reflectionCount)
  const items: Array<MetaItem> = [
    {
      id: "instructions",
      required: true,
      text: INSTRUCTIONS[role]({ ...state.limits, maxReflections: reflectionsLeft })
    },
    { id: "goal", required: true, text: `Goal: ${state.goal}` }
  ]
  const plan = state.currentPlan
  if (plan !== undefined && role !== "judge" && role !== "planner")
    items.push({
      id: "plan",
      priority: 90,
      text: [`## Plan (version ${plan.version})`, ...plan.steps.map((s) => statusLine(state, s))].join("\n")
    })
  if (role === "reflector" || role === "replanner" || role === "answerer") {
    const results = Object.values(state.specialistResults).sort((a, b) => a.at.localeCompare(b.at))
    for (const [i, r] of results.entries()) {
      const step = plan?.steps.find((s) => s.id === r.stepId)
      items.push({
        id: `result:${r.stepId}`,
        // Newer results first when the share cannot hold them all.
        priority: 50 + i,
        text: `### Result of ${r.stepId}${step === undefined ? "" : ` (${step.title})`}\n${r.text}`
      })
    }
    for (const [i, f] of state.feedbackHistory.entries()) {
      const last = i === state.feedbackHistory.length - 1
      const lines = [
        ...f.notes,
        ...(f.decision === undefined
          ? []
          : [`Decision: ${f.decision}${f.feedback ? `: ${f.feedback}` : ""}`]),
        ...(f.forced === undefined ? [] : [`(${f.forced})`])
      ]
      if (lines.length > 0)
        items.push({
          id: `feedback:${f.round}`,
          priority: last ? 80 : 10 + i,
          text: [`### Feedback, round ${f.round}`, ...lines].join("\n")
        })
    }
  }
  return { role, items }
}

const SPECIALIST_BACKGROUND =
  "You are a specialist working on one step of a larger plan. Do the current step only, using the results of the steps it depends on; answer with the step's result, plainly, so it can be handed on."

/** A specialist's context: its step as a node under the goal, the steps it depends on with their results. */
export const specialistContextOf = (state: EnhancedState, step: PlanStep): ContextInfo => {
  const plan = state.currentPlan
  return {
    background: SPECIALIST_BACKGROUND,
    map: { title: `Run ${state.runId}`, coreQuestion: state.goal, finalGoal: state.goal },
    node: {
      id: step.id,
      title: step.title,
      question: step.instruction,
      status: "in-progress",
      dependencies: step.dependsOn
    },
    ancestors: [{ id: "goal", title: state.goal, status: "in-progress" }],
    dependencies: step.dependsOn.flatMap((id) => {
      const result = state.specialistResults[id]
      const dep = plan?.steps.find((s) => s.id === id)
      return result === undefined
        ? []
        : [{ id, title: dep?.title ?? id, status: "done", conclusion: result.text }]
    }),
    children: [],
    conversation: [],
    userContext: {}
  }
}

/**
 * A specialist's shares: its node context (`tree__context`, on the knowledge share) is what it works
 * from; a new session has little history to keep.
 */
export const SPECIALIST_SHARES: Readonly<Record<string, number>> = {
  knowledge: 0.3,
  recent_history: 0.08,
  important_history: 0.06,
  semantic: 0.02,
  skills: 0.02
}

/**
 * The manifest of a specialist's session (its `context-config.json`): the parent's model, global
 * prompts and tools, the specialist's shares, and the specialist budget as a cap on its input.
 */
const specialistManifest = (parent: Manifest, window: number, budget: number): Manifest => {
  const { query: _query, tree: _tree, todo: _todo, budget: parentBudget, ...rest } = parent
  const { outputReserve: _reserve, outputReserveRatio: _ratio, ...shares } = parentBudget
  // The budget caps the input: the answer keeps at least the reserve the session gives it.
  const reserve =
    parentBudget.outputReserve ??
    Math.ceil(window * (parentBudget.outputReserveRatio ?? DEFAULT_OUTPUT_RESERVE_RATIO))
  return {
    ...rest,
    policy: "notebook",
    systemPrompt: parent.systemPrompt.filter((s) => s.type === "global"),
    profileBlocks: [],
    references: [],
    knowledge: [],
    sources: {},
    chatHistory: { source: parent.chatHistory.source, strategy: "full" },
    budget: {
      ...(window - budget > reserve ? { ...shares, outputReserve: window - budget } : parentBudget),
      shares: { ...parentBudget.shares, ...SPECIALIST_SHARES }
    }
  }
}

// --- the run

const now = () => new Date().toISOString()

/**
 * Runs (or resumes) a plan-execute-reflect run as a turn of its session; its final state. A
 * failure of the run itself (`RunReplyInvalid`, the model's errors) is recorded in the state
 * (`failed`, with the error) before it fails the effect.
 */
export const run = <E, R>(
  request: RunRequest,
  model: RunModel<E, R>,
  options: RunOptions
): Effect.Effect<
  EnhancedState,
  TurnError | StoreError | RunReplyInvalid | RunTurnTaken | SpecialistSessionTaken | E,
  R | TurnEngine | Store
> =>
  Effect.gen(function* () {
    const engine = yield* TurnEngine
    const store = yield* Store
    const emit = options.emit ?? (() => Effect.void)
    const runId = runIdOf(request.sessionId, request.idempotencyKey)
    // The run's own key for its turn: never one of the session's chat keys.
    const key = `run:${runId}`
    const existing = yield* store.readRun(request.sessionId, runId).pipe(
      Effect.map(Option.some),
      Effect.catchTag("RunNotFound", () => Effect.succeed(Option.none<EnhancedState>()))
    )
    // Announced with the turn: a session that takes no turns refuses the run before any event.
    const announce = emit({
      type: "run",
      runId,
      sessionId: request.sessionId,
      resumed: Option.isSome(existing)
    })
    let state: EnhancedState | undefined = Option.getOrUndefined(existing)

    const driver: Driver<
      TurnError | StoreError | RunReplyInvalid | RunTurnTaken | SpecialistSessionTaken | E,
      R | TurnEngine | Store
    > = {
      model: (_compiled, ctx) =>
        Effect.gen(function* () {
          const started = now()
          // Read again under the session's lock: another request may have moved the run meanwhile.
          state = yield* store
            .readRun(request.sessionId, runId)
            .pipe(Effect.catchTag("RunNotFound", () => Effect.succeed(undefined)))
          if (state === undefined) {
            // A fresh run on a turn another run started (an unfinished turn of the same goal is
            // resumed by the turn engine whatever the key): that run owns it.
            const owner = yield* ownerOf(store, request.sessionId, ctx.turn, runId)
            if (owner !== undefined)
              return yield* new RunTurnTaken({ sessionId: request.sessionId, turn: ctx.turn, runId: owner })
          }
          let s: EnhancedState = state ?? {
            format: RUN_FORMAT,
            version: 0,
            runId,
            sessionId: request.sessionId,
            goal: request.goal,
            model: ctx.model.name,
            idempotencyKey: request.idempotencyKey ?? key,
            createdAt: started,
            updatedAt: started,
            phase: "start",
            planHistory: [],
            executionStatus: {},
            executionHistory: [],
            specialistResults: {},
            feedbackHistory: [],
            reflectionCount: 0,
            shouldContinue: true,
            isCompleted: false,
            limits: options.limits,
            transitions: []
          }
          const save = (next: Partial<EnhancedState>) =>
            Effect.gen(function* () {
              s = { ...s, ...next, version: s.version + 1, updatedAt: now() }
              state = s
              yield* store.writeRun(s)
            })
          const go = (to: RunPhase, patch: Partial<EnhancedState> = {}) =>
            Effect.gen(function* () {
              const from = s.phase
              yield* save({
                ...patch,
                phase: to,
                transitions: [...s.transitions, { from, to, at: now(), version: s.version + 1 }]
              })
              yield* emit({ type: "transition", from, to, version: s.version })
            })
          const ask = (role: RunRole) =>
            Effect.gen(function* () {
              const compiled = yield* ctx.recompile({ meta: metaContextOf(role, s) })
              if (options.onAsked) yield* options.onAsked(role, compiled)
              return (yield* model.ask(role, compiled, ctx)).text
            })
          const fromEither = <A, X>(either: Either.Either<A, X>) =>
            Either.match(either, { onLeft: Effect.fail, onRight: Effect.succeed })

          // A run asked again (the same turn): it goes on from where it stopped.
          const { error: _cleared, ...rest } = s
          s = rest
          yield* save({ turn: ctx.turn, shouldContinue: s.phase !== "done" })
          if (s.phase === "failed") {
            const before = s.transitions.at(-1)?.from ?? "start"
            yield* go(before === "failed" ? "start" : before)
          }

          const machine = Effect.gen(function* () {
            for (;;) {
              switch (s.phase) {
                case "start":
                  yield* go("analyze")
                  break
                case "analyze":
                  // The session's context for this turn is compiled (the step's request); judge it.
                  yield* go("judge")
                  break
                case "judge": {
                  const judged = yield* fromEither(parseReply("judge", yield* ask("judge"), Judgement))
                  yield* emit({ type: "complexity", complexity: judged.complexity, reason: judged.reason })
                  yield* go(judged.complexity === "simple" ? "answer-directly" : "plan", {
                    complexity: judged.complexity,
                    complexityReason: judged.reason
                  })
                  break
                }
                case "answer-directly":
                case "final-answer": {
                  const text = yield* ask("answerer")
                  yield* go("done", {
                    finalAnswer: text,
                    shouldContinue: false,
                    isCompleted: true
                  })
                  break
                }
                case "plan":
                case "update-plan": {
                  const role = s.phase === "plan" ? "planner" : "replanner"
                  const version = (s.currentPlan?.version ?? 0) + 1
                  const proposed = yield* fromEither(planOf(role, yield* ask(role), version, now()))
                  const plan = keepFinished(s, proposed)
                  const status = { ...s.executionStatus }
                  const kept: Array<ExecutionEntry> = []
                  for (const step of plan.steps)
                    if (s.specialistResults[step.id] !== undefined) {
                      status[step.id] = "done"
                      kept.push({ at: now(), planVersion: version, stepId: step.id, event: "kept" })
                    } else status[step.id] = "pending"
                  yield* emit({ type: "plan", plan })
                  yield* go("execute", {
                    currentPlan: plan,
                    planHistory: [...s.planHistory, plan],
                    executionStatus: status,
                    executionHistory: [...s.executionHistory, ...kept]
                  })
                  break
                }
                case "execute": {
                  yield* execute()
                  yield* go("collect")
                  break
                }
                case "collect": {
                  // Every step that ran has its one result (a step that failed has none).
                  yield* go("feedback")
                  break
                }
                case "feedback": {
                  const round = s.feedbackHistory.length + 1
                  const notes = feedbackNotes(s)
                  yield* emit({ type: "feedback", round, notes })
                  yield* go("reflect", {
                    feedbackHistory: [...s.feedbackHistory, { round, at: now(), notes }]
                  })
                  break
                }
                case "reflect": {
                  const last = s.feedbackHistory.at(-1)!
                  let decision: ReflectionDecision
                  let feedback = ""
                  let forced: string | undefined
                  let count = s.reflectionCount
                  if (s.reflectionCount >= s.limits.maxReflections) {
                    decision = "finish"
                    forced = `the reflection limit (${s.limits.maxReflections}) is reached: answering with the results there are`
                  } else {
                    const reflected = yield* fromEither(
                      parseReply("reflector", yield* ask("reflector"), Reflection)
                    )
                    count++
                    decision = reflected.decision
                    feedback = reflected.feedback
                    if (decision === "continue" && pendingSteps(s).length === 0) {
                      forced = "nothing is left to run: answering with the results there are"
                      decision = "finish"
                    }
                    if (decision !== "finish" && executedCount(s) >= s.limits.maxSteps) {
                      forced = `the step limit (${s.limits.maxSteps}) is reached: answering with the results there are`
                      decision = "finish"
                    }
                  }
                  yield* emit({
                    type: "reflection",
                    round: last.round,
                    decision,
                    feedback,
                    ...(forced === undefined ? {} : { forced })
                  })
                  yield* go(
                    decision === "finish"
                      ? "final-answer"
                      : decision === "adjust"
                        ? "update-plan"
                        : "execute",
                    {
                      reflectionCount: count,
                      shouldContinue: decision !== "finish",
                      feedbackHistory: [
                        ...s.feedbackHistory.slice(0, -1),
                        {
                          ...last,
                          decision,
                          feedback,
                          ...(forced === undefined ? {} : { forced })
                        }
                      ]
                    }
                  )
                  break
                }
                case "done":
                  return s.finalAnswer ?? ""
                case "failed":
                  return yield* Effect.dieMessage("a failed run is resumed before its machine runs")
              }
            }
          })

          /** Runs the plan's steps not done yet, each after those it depends on, within the step limit. */
          const execute = () =>
            Effect.gen(function* () {
              const plan = s.currentPlan!
              for (const step of orderOf(plan.steps) ?? plan.steps) {
                const status = s.executionStatus[step.id]
                if (status === "done") continue
                const missing = step.dependsOn.filter((d) => s.specialistResults[d] === undefined)
                // A step that was running when the run stopped goes on (its turn resumes by its
                // key): it was counted when it started.
                const reason =
                  missing.length > 0
                    ? `it depends on ${missing.join(", ")}, which has no result`
                    : status !== "running" && executedCount(s) >= s.limits.maxSteps
                      ? `the run's limit of ${s.limits.maxSteps} specialist steps is reached`
                      : undefined
                if (reason !== undefined) {
                  yield* emit({ type: "step-skipped", stepId: step.id, reason })
                  yield* save({
                    executionStatus: { ...s.executionStatus, [step.id]: "skipped" },
                    executionHistory: [
                      ...s.executionHistory,
                      {
                        at: now(),
                        planVersion: plan.version,
                        stepId: step.id,
                        event: "skipped",
                        message: reason
                      }
                    ]
                  })
                  continue
                }
                yield* specialist(step, plan.version, status === "running")
              }
            })

          const specialist = (step: PlanStep, planVersion: number, resumed: boolean) =>
            Effect.gen(function* () {
              const childSession = `${runId}-${step.id}`
              const child = yield* store.getSession(childSession).pipe(
                Effect.catchTag("SessionNotFound", () =>
                  store.createSession({
                    id: childSession,
                    concept: step.title.slice(0, 200),
                    metadata: { parent: request.sessionId, run: runId, step: step.id, role: "specialist" }
                  })
                )
              )
              // Only this run's own child: a session that happens to have the id is not adopted.
              if (child.metadata.run !== runId || child.metadata.step !== step.id)
                return yield* new SpecialistSessionTaken({ sessionId: childSession, runId })
              // Written once (a resumed run finds it, even after a crash between the two).
              if ((yield* store.read("session", childSession, MANIFEST_FILE)) === undefined) {
                const manifest = specialistManifest(
                  ctx.manifest,
                  ctx.model.contextWindow,
                  s.limits.specialistBudget
                )
                yield* store.writeFile(childSession, MANIFEST_FILE, `${JSON.stringify(manifest, null, 2)}\n`)
              }
              yield* emit({ type: "step-started", stepId: step.id, title: step.title, childSession })
              if (!resumed)
                yield* save({
                  executionStatus: { ...s.executionStatus, [step.id]: "running" },
                  executionHistory: [
                    ...s.executionHistory,
                    { at: now(), planVersion, stepId: step.id, event: "started", childSession }
                  ]
                })
              let contextTokens = 0
              const driver = yield* model.specialist({ childSession, step, state: s })
              const turnOptions: TurnOptions = {
                defaultModel: s.model,
                maxSteps: options.maxToolSteps,
                format: "openai",
                ...(options.tools === undefined ? {} : { tools: options.tools }),
                extras: { nodeContext: specialistContextOf(s, step) },
                onCompiled: (compiled, at) =>
                  at.step === 1
                    ? Effect.zipRight(
                        Effect.sync(() => {
                          contextTokens = compiled.report.total ?? 0
                        }),
                        options.onSpecialistCompiled
                          ? options.onSpecialistCompiled(step.id, compiled)
                          : Effect.void
                      )
                    : Effect.void
              }
              const outcome = yield* Effect.either(
                engine.turn(
                  {
                    sessionId: childSession,
                    input: step.instruction,
                    idempotencyKey: `${runId}:${step.id}`,
                    model: s.model
                  },
                  driver,
                  turnOptions
                )
              )
              if (
                Either.isLeft(outcome) ||
                outcome.right._tag !== "Answered" ||
                outcome.right.stopped === true
              ) {
                const message = Either.isLeft(outcome)
                  ? outcome.left instanceof Error
                    ? outcome.left.message
                    : String(outcome.left)
                  : outcome.right._tag === "Answered"
                    ? `the specialist used its ${options.maxToolSteps} tool steps without an answer`
                    : "the specialist asked for tools nobody runs"
                yield* emit({ type: "step-failed", stepId: step.id, message })
                yield* save({
                  executionStatus: { ...s.executionStatus, [step.id]: "failed" },
                  executionHistory: [
                    ...s.executionHistory,
                    { at: now(), planVersion, stepId: step.id, event: "failed", childSession, message }
                  ]
                })
                return
              }
              const answered = outcome.right
              yield* emit({
                type: "step-finished",
                stepId: step.id,
                childSession,
                result: answered.text,
                contextTokens
              })
              yield* save({
                executionStatus: { ...s.executionStatus, [step.id]: "done" },
                executionHistory: [
                  ...s.executionHistory,
                  { at: now(), planVersion, stepId: step.id, event: "finished", childSession }
                ],
                specialistResults: {
                  ...s.specialistResults,
                  [step.id]: {
                    stepId: step.id,
                    planVersion,
                    childSession,
                    turn: answered.turn,
                    text: answered.text,
                    contextTokens,
                    at: now()
                  }
                }
              })
            })

          const text = yield* machine.pipe(
            Effect.tapError((error) =>
              go("failed", {
                shouldContinue: false,
                error: {
                  tag:
                    typeof error === "object" && error !== null && "_tag" in error
                      ? String((error as { _tag: unknown })._tag)
                      : "Error",
                  message: error instanceof Error ? error.message : String(error)
                }
              }).pipe(Effect.ignore)
            )
          )
          return { text, toolCalls: [] }
        })
    }

    const outcome = yield* engine.turn(
      {
        sessionId: request.sessionId,
        input: request.goal,
        idempotencyKey: key,
        ...(request.model === undefined ? {} : { model: request.model })
      },
      driver,
      {
        defaultModel: options.defaultModel,
        maxSteps: 1,
        format: "openai",
        emit: (event) =>
          event.type === "turn"
            ? Effect.zipRight(announce, emit(event))
            : event.type === "usage" ||
                event.type === "compaction-started" ||
                event.type === "compaction-finished" ||
                event.type === "compaction-fell-back"
              ? emit(event)
              : Effect.void
      }
    )
    const final = yield* store.readRun(request.sessionId, runId)
    yield* emit({
      type: "done",
      runId,
      turn: outcome.turn,
      text: outcome._tag === "Answered" ? outcome.text : (final.finalAnswer ?? ""),
      replayed: outcome._tag === "Answered" && outcome.replayed
    })
    return final
  })

/** Steps of the current plan that have not run to a result (pending, failed or skipped). */
const pendingSteps = (state: EnhancedState): ReadonlyArray<PlanStep> =>
  (state.currentPlan?.steps ?? []).filter((s) => state.executionStatus[s.id] !== "done")

/** Specialist executions so far (started, whatever their end). */
const executedCount = (state: EnhancedState): number =>
  state.executionHistory.filter((e) => e.event === "started").length

/** What a round's results say before the reflection: failed, skipped and empty steps. */
const feedbackNotes = (state: EnhancedState): ReadonlyArray<string> => {
  const notes: Array<string> = []
  const plan = state.currentPlan
  for (const step of plan?.steps ?? []) {
    const status = state.executionStatus[step.id]
    const last = [...state.executionHistory].reverse().find((e) => e.stepId === step.id)
    if (status === "failed") notes.push(`Step ${step.id} failed: ${last?.message ?? "no result"}`)
    else if (status === "skipped") notes.push(`Step ${step.id} was skipped: ${last?.message ?? ""}`)
    else if (status === "done" && (state.specialistResults[step.id]?.text.trim() ?? "") === "")
      notes.push(`Step ${step.id} answered nothing`)
  }
  const done = (plan?.steps ?? []).filter((s) => state.executionStatus[s.id] === "done").length
  notes.unshift(`${done} of ${plan?.steps.length ?? 0} steps have results.`)
  return notes
}

/**
 * A new plan as the run keeps it: a step given again with the id and instruction of a finished
 * one keeps that result; a step reusing a finished step's id for other work gets a new id
 * (`<id>-v<version>`), so no step id ever has two results.
 */
const keepFinished = (state: EnhancedState, plan: Plan): Plan => {
  const renamed = new Map<string, string>()
  const known = new Set(Object.keys(state.executionStatus))
  for (const step of plan.steps) {
    const done = state.specialistResults[step.id]
    const before = state.currentPlan?.steps.find((s) => s.id === step.id)
    const sameWork = before !== undefined && before.instruction === step.instruction
    if ((done !== undefined || known.has(step.id)) && !sameWork) {
      let id = `${step.id}-v${plan.version}`
      for (let n = 2; known.has(id) || plan.steps.some((s) => s.id === id); n++)
        id = `${step.id}-v${plan.version}-${n}`
      renamed.set(step.id, id)
    }
  }
  // A step built on work that is redone is new work too.
  for (let changed = true; changed; ) {
    changed = false
    for (const step of plan.steps)
      if (
        !renamed.has(step.id) &&
        known.has(step.id) &&
        step.dependsOn.some((d) => renamed.has(d) || !known.has(d))
      ) {
        let id = `${step.id}-v${plan.version}`
        for (let n = 2; known.has(id) || plan.steps.some((s) => s.id === id); n++)
          id = `${step.id}-v${plan.version}-${n}`
        renamed.set(step.id, id)
        changed = true
      }
  }
  if (renamed.size === 0) return plan
  return {
    ...plan,
    steps: plan.steps.map((s) => ({
      ...s,
      id: renamed.get(s.id) ?? s.id,
      dependsOn: s.dependsOn.map((d) => renamed.get(d) ?? d)
    }))
  }
}
