/**
 * A plan-execute-reflect run's state (seed 004 `EnhancedState`), as the store keeps it:
 * `<session>/runs/<runId>.json`, rewritten whole (atomically) at every transition with its
 * `version` one higher. The orchestrator (`@ctxo/agent/Orchestrator`) writes it; the HTTP contract
 * answers with it (`GET /api/sessions/{id}/runs/{runId}`). Pure: schemas and their decoders.
 */
import { Schema } from "effect"
import { decodeWith } from "./Records.ts"

export const RUN_FORMAT = "ctxo.run/v1"

/**
 * Where a run is (the seed's state diagram): `analyze` (the context is compiled), `judge`
 * (complexity), `answer-directly` (simple), `plan`, `execute`, `collect`, `feedback`, `reflect`,
 * `update-plan`, `final-answer`, then `done`; `failed` when a phase cannot go on.
 */
export const RunPhase = Schema.Literal(
  "start",
  "analyze",
  "judge",
  "answer-directly",
  "plan",
  "execute",
  "collect",
  "feedback",
  "reflect",
  "update-plan",
  "final-answer",
  "done",
  "failed"
).annotations({ identifier: "RunPhase" })
export type RunPhase = typeof RunPhase.Type

export const PlanStep = Schema.Struct({
  /** Unique within the run: a step is executed at most once. */
  id: Schema.String,
  title: Schema.String,
  /** What the specialist is asked (its input). */
  instruction: Schema.String,
  /** Steps whose results it needs (they run first; the specialist sees their results, no others). */
  dependsOn: Schema.Array(Schema.String)
}).annotations({ identifier: "PlanStep" })
export type PlanStep = typeof PlanStep.Type

export const Plan = Schema.Struct({
  version: Schema.Int,
  steps: Schema.Array(PlanStep),
  rationale: Schema.optionalWith(Schema.String, { exact: true }),
  createdAt: Schema.String
}).annotations({ identifier: "Plan" })
export type Plan = typeof Plan.Type

export const StepStatus = Schema.Literal("pending", "running", "done", "failed", "skipped").annotations({
  identifier: "StepStatus"
})
export type StepStatus = typeof StepStatus.Type

export const ExecutionEntry = Schema.Struct({
  at: Schema.String,
  planVersion: Schema.Int,
  stepId: Schema.String,
  event: Schema.Literal("started", "finished", "failed", "skipped", "kept"),
  childSession: Schema.optionalWith(Schema.String, { exact: true }),
  message: Schema.optionalWith(Schema.String, { exact: true })
}).annotations({ identifier: "ExecutionEntry" })
export type ExecutionEntry = typeof ExecutionEntry.Type

export const SpecialistResult = Schema.Struct({
  stepId: Schema.String,
  planVersion: Schema.Int,
  /** The child session the specialist worked in (its history holds the whole ReAct loop). */
  childSession: Schema.String,
  turn: Schema.Int,
  text: Schema.String,
  /** Tokens of the specialist's first request (its compiled context). */
  contextTokens: Schema.Int,
  at: Schema.String
}).annotations({ identifier: "SpecialistResult" })
export type SpecialistResult = typeof SpecialistResult.Type

export const ReflectionDecision = Schema.Literal("continue", "adjust", "finish").annotations({
  identifier: "ReflectionDecision"
})
export type ReflectionDecision = typeof ReflectionDecision.Type

export const Feedback = Schema.Struct({
  round: Schema.Int,
  at: Schema.String,
  /** What the round's results say (failed, skipped or empty steps), before the reflection. */
  notes: Schema.Array(Schema.String),
  decision: Schema.optionalWith(ReflectionDecision, { exact: true }),
  /** The reflector's own words. */
  feedback: Schema.optionalWith(Schema.String, { exact: true }),
  /** Why the orchestrator overrode the reflector (a limit reached, nothing left to run). */
  forced: Schema.optionalWith(Schema.String, { exact: true })
}).annotations({ identifier: "Feedback" })
export type Feedback = typeof Feedback.Type

export const Transition = Schema.Struct({
  from: RunPhase,
  to: RunPhase,
  at: Schema.String,
  /** The state's version after the transition. */
  version: Schema.Int
}).annotations({ identifier: "Transition" })
export type Transition = typeof Transition.Type

export const RunLimits = Schema.Struct({
  /** Reflections a run may make; at the limit it answers with what it has. */
  maxReflections: Schema.Int,
  /** Specialist executions a run may make; steps beyond are skipped. */
  maxSteps: Schema.Int,
  /** Tokens of a specialist's request (its compiled context and input). */
  specialistBudget: Schema.Int
}).annotations({ identifier: "RunLimits" })
export type RunLimits = typeof RunLimits.Type

export const EnhancedState = Schema.Struct({
  format: Schema.Literal(RUN_FORMAT),
  /** One higher at every write. */
  version: Schema.Int,
  runId: Schema.String,
  sessionId: Schema.String,
  goal: Schema.String,
  model: Schema.String,
  idempotencyKey: Schema.String,
  /** The session's turn the run answers (its input is the goal, its answer the final answer). */
  turn: Schema.optionalWith(Schema.Int, { exact: true }),
  createdAt: Schema.String,
  updatedAt: Schema.String,
  phase: RunPhase,
  complexity: Schema.optionalWith(Schema.Literal("simple", "complex"), { exact: true }),
  complexityReason: Schema.optionalWith(Schema.String, { exact: true }),
  currentPlan: Schema.optionalWith(Plan, { exact: true }),
  planHistory: Schema.Array(Plan),
  executionStatus: Schema.Record({ key: Schema.String, value: StepStatus }),
  executionHistory: Schema.Array(ExecutionEntry),
  specialistResults: Schema.Record({ key: Schema.String, value: SpecialistResult }),
  feedbackHistory: Schema.Array(Feedback),
  reflectionCount: Schema.Int,
  shouldContinue: Schema.Boolean,
  isCompleted: Schema.Boolean,
  finalAnswer: Schema.optionalWith(Schema.String, { exact: true }),
  error: Schema.optionalWith(Schema.Struct({ tag: Schema.String, message: Schema.String }), { exact: true }),
  limits: RunLimits,
  transitions: Schema.Array(Transition)
}).annotations({ identifier: "EnhancedState" })
export type EnhancedState = typeof EnhancedState.Type

/** A run file read (`file` names it in the error). */
export const decodeRun = decodeWith(Schema.parseJson(EnhancedState))
