/**
 * Plan-execute-reflect runs over HTTP (seed 004, `@ctxo/agent/Orchestrator`): start one and follow
 * its transitions as Server-Sent Events, list a session's runs, read one's `EnhancedState`.
 */
import { EnhancedState, RunPhase } from "@ctxo/store/Runs"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"

const SessionPath = Schema.Struct({ id: Schema.String })

/** `POST /api/sessions/{id}/runs`: the goal, and optionally the model and an idempotency key. */
export const RunRequest = Schema.Struct({
  goal: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(20_000)),
  model: Schema.optional(Schema.String),
  /** The same key resumes a run that stopped (or answers a finished one); without one, a new run. */
  idempotencyKey: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)))
})
  .annotations({ identifier: "RunRequest" })
  .annotations({ parseOptions: { onExcessProperty: "error" } })

export const RunSummary = Schema.Struct({
  runId: Schema.String,
  goal: Schema.String,
  phase: RunPhase,
  isCompleted: Schema.Boolean,
  reflectionCount: Schema.Int,
  steps: Schema.Int,
  updatedAt: Schema.String
}).annotations({ identifier: "RunSummary" })

export class RunsGroup extends HttpApiGroup.make("runs")
  .add(
    HttpApiEndpoint.post("start", "/api/sessions/:id/runs")
      .setPath(SessionPath)
      .setPayload(RunRequest)
      .addSuccess(
        Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/event-stream" }))
      )
      .annotate(OpenApi.Summary, "Start (or resume) a plan-execute-reflect run (Server-Sent Events)")
      .annotate(
        OpenApi.Description,
        "Runs the goal as one turn of the session: analyze, judge complexity (simple: answer directly), plan, execute each step by a specialist on its own child session, collect, feedback, reflect (continue, adjust the plan, or finish), final answer. Streams events: run, turn, transition, complexity, plan, step-started, step-finished, step-failed, step-skipped, feedback, reflection, text-delta (the final answer's words), done, error. Limits: CTXO_RUN_MAX_REFLECTIONS, CTXO_RUN_MAX_STEPS, CTXO_RUN_SPECIALIST_BUDGET. The same `idempotencyKey` resumes a run that stopped (finished steps are not run again) or answers a finished one from history. A paused or ended session is 409 SessionNotActive before the stream starts."
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/api/sessions/:id/runs")
      .setPath(SessionPath)
      .addSuccess(Schema.Struct({ runs: Schema.Array(RunSummary) }))
      .annotate(OpenApi.Summary, "The session's runs, oldest first")
  )
  .add(
    HttpApiEndpoint.get("get", "/api/sessions/:id/runs/:runId")
      .setPath(Schema.Struct({ id: Schema.String, runId: Schema.String }))
      .addSuccess(EnhancedState)
      .annotate(
        OpenApi.Summary,
        "A run's state (EnhancedState): plan and plan history, execution, results, feedback"
      )
  ) {}
