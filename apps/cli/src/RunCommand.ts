/**
 * `ctxo run`: a plan-execute-reflect run of a session on a data root (seed 004), through the same
 * `@ctxo/agent/RunStream` the gateway's `POST /api/sessions/{id}/runs` streams. The model is the
 * gateway's: `CTXO_UPSTREAM_BASE_URL` / `CTXO_UPSTREAM_API_KEY`, else the local deterministic model;
 * the limits are `CTXO_RUN_*` or the options. Each transition prints as a line; `--json` prints the
 * run's final state (EnhancedState); a run that fails says why and exits 1.
 */
import * as ModelClient from "@ctxo/agent/ModelClient"
import { DEFAULT_LIMITS, type RunEvent } from "@ctxo/agent/Orchestrator"
import { runStream } from "@ctxo/agent/RunStream"
import * as Store from "@ctxo/store/Store"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Config, Console, Effect, Layer, Logger, LogLevel, Option, Redacted, Stream } from "effect"
import type { Example } from "./internal/help.ts"
import { modelsFile } from "./internal/models.ts"
import { dataOption, engineOn } from "./internal/options.ts"

const data = dataOption(
  "The data root: sessions.json and one directory per session. Defaults to ./data, the live data root of the gateway (`pnpm start`); while a gateway serves it, prefer POST /api/sessions/{id}/runs (the two processes do not share locks)."
)
const session = Options.text("session").pipe(
  Options.withAlias("s"),
  Options.withPseudoName("ID"),
  Options.withDescription(
    "The session the run is a turn of (its goal the input, its final answer the answer)."
  )
)
const model = Options.text("model").pipe(
  Options.withAlias("m"),
  Options.withPseudoName("MODEL"),
  Options.withDescription("The model (default: the session manifest's, else CTXO_MODEL, else gpt-4o)."),
  Options.optional
)
const key = Options.text("key").pipe(
  Options.withPseudoName("KEY"),
  Options.withDescription(
    "An idempotency key: the same key resumes a run that stopped (finished steps are not run again) or prints a finished one."
  ),
  Options.optional
)
const limit = (name: string, what: string, min: number) =>
  Options.integer(name).pipe(
    Options.withPseudoName("N"),
    Options.withDescription(what),
    Options.filterMap(
      (n) => (n >= min ? Option.some(n) : Option.none()),
      `--${name} must be at least ${min}`
    ),
    Options.optional
  )
const maxReflections = limit(
  "max-reflections",
  `Reflections before the run answers with what it has (default: CTXO_RUN_MAX_REFLECTIONS, else ${DEFAULT_LIMITS.maxReflections}).`,
  0
)
const maxSteps = limit(
  "max-steps",
  `Specialist steps; further steps are skipped (default: CTXO_RUN_MAX_STEPS, else ${DEFAULT_LIMITS.maxSteps}).`,
  1
)
const specialistBudget = limit(
  "specialist-budget",
  `Tokens of a specialist's request, at least 256 (default: CTXO_RUN_SPECIALIST_BUDGET, else ${DEFAULT_LIMITS.specialistBudget}).`,
  256
)
const json = Options.boolean("json").pipe(
  Options.withDescription("Print the run's final state (EnhancedState) as JSON instead of its transitions.")
)
const goal = Args.text({ name: "goal" }).pipe(Args.withDescription("What the run is to achieve."))

/** A limit from the environment, checked as the gateway checks it. */
const atLeast = (name: string, min: number, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: `${name} must be at least ${min}`, validation: (n) => n >= min }),
    Config.withDefault(fallback)
  )

/** The upstream and limits as the gateway reads them from the environment. */
const environment = Config.all({
  baseUrl: Config.option(Config.string("CTXO_UPSTREAM_BASE_URL")),
  apiKey: Config.option(Config.redacted("CTXO_UPSTREAM_API_KEY")).pipe(
    Config.map(Option.filter((k) => Redacted.value(k).trim() !== ""))
  ),
  model: Config.string("CTXO_MODEL").pipe(Config.withDefault("gpt-4o")),
  maxReflections: atLeast("CTXO_RUN_MAX_REFLECTIONS", 0, DEFAULT_LIMITS.maxReflections),
  maxSteps: atLeast("CTXO_RUN_MAX_STEPS", 1, DEFAULT_LIMITS.maxSteps),
  specialistBudget: atLeast("CTXO_RUN_SPECIALIST_BUDGET", 256, DEFAULT_LIMITS.specialistBudget)
})

/** One event as a line a person reads (text deltas are the answer's words: printed whole at the end). */
export const eventLine = (event: RunEvent): string | undefined => {
  switch (event.type) {
    case "run":
      return `run ${event.runId} of session ${event.sessionId}${event.resumed ? " (resumed)" : ""}`
    case "transition":
      return `> ${event.to}`
    case "complexity":
      return `  complexity: ${event.complexity}${event.reason === "" ? "" : ` (${event.reason})`}`
    case "plan":
      return [
        `  plan v${event.plan.version}:`,
        ...event.plan.steps.map(
          (s) =>
            `    ${s.id}: ${s.title}${s.dependsOn.length === 0 ? "" : ` (after ${s.dependsOn.join(", ")})`}`
        )
      ].join("\n")
    case "step-started":
      return `  ${event.stepId} started on session ${event.childSession}`
    case "step-finished":
      return `  ${event.stepId} done (${event.contextTokens} tokens of context): ${event.result.split("\n")[0]!.slice(0, 120)}`
    case "step-failed":
      return `  ${event.stepId} failed: ${event.message}`
    case "step-skipped":
      return `  ${event.stepId} skipped: ${event.reason}`
    case "feedback":
      return event.notes.map((n) => `  feedback: ${n}`).join("\n")
    case "reflection":
      return `  reflection ${event.round}: ${event.decision}${event.feedback === "" ? "" : ` (${event.feedback})`}${event.forced === undefined ? "" : `; ${event.forced}`}`
    case "done":
      return `\n${event.text}`
    default:
      return undefined
  }
}

export const runCommand = Command.make(
  "run",
  { data, session, model, key, maxReflections, maxSteps, specialistBudget, json, models: modelsFile, goal },
  (args) =>
    Effect.gen(function* () {
      const env = yield* environment
      const limits = {
        maxReflections: Option.getOrElse(args.maxReflections, () => env.maxReflections),
        maxSteps: Option.getOrElse(args.maxSteps, () => env.maxSteps),
        specialistBudget: Option.getOrElse(args.specialistBudget, () => env.specialistBudget)
      }
      if (Option.isNone(env.apiKey) && Option.isNone(env.baseUrl))
        yield* Console.error(
          "No upstream is configured (CTXO_UPSTREAM_BASE_URL, CTXO_UPSTREAM_API_KEY): the local deterministic model answers."
        )
      const store = yield* Store.Store
      let failure: { readonly tag: string; readonly message: string } | undefined
      let runId: string | undefined
      yield* runStream(
        {
          sessionId: args.session,
          goal: args.goal,
          ...Option.match(args.model, { onNone: () => ({}), onSome: (m) => ({ model: m }) }),
          ...Option.match(args.key, { onNone: () => ({}), onSome: (k) => ({ idempotencyKey: k }) })
        },
        { defaultModel: env.model, limits, maxToolSteps: 8 }
      ).pipe(
        Stream.runForEach((event) =>
          Effect.gen(function* () {
            if (event.type === "run") runId = event.runId
            if (event.type === "error") failure = event
            const line = args.json ? undefined : eventLine(event)
            if (line !== undefined) yield* Console.log(line)
          })
        )
      )
      if (args.json && runId !== undefined)
        yield* Console.log(JSON.stringify(yield* store.readRun(args.session, runId), null, 2))
      if (failure !== undefined)
        return yield* Effect.fail(new Error(`The run failed (${failure.tag}): ${failure.message}`))
    }).pipe(
      Effect.provide(
        Layer.merge(
          engineOn(args.data, args.models),
          Layer.unwrapEffect(
            Effect.map(environment, (env) =>
              ModelClient.layer({
                apiKey: env.apiKey,
                baseUrl: env.baseUrl,
                timeoutMs: 120_000,
                firstByteMs: 60_000,
                idleMs: 30_000
              })
            )
          )
        )
      ),
      // Logs would mix with what is printed (stdout is the result): warnings and errors only.
      Logger.withMinimumLogLevel(LogLevel.Warning)
    )
).pipe(
  Command.withDescription(
    "Run a goal as plan-execute-reflect on a session: judge it, answer directly or plan steps, have each step done by a specialist on its own child session (seeing its step and the results it depends on), reflect (continue, adjust the plan, finish) within the limits, and write the final answer as the session's turn. Prints each transition; the state is kept in <session>/runs/<runId>.json."
  )
)

export const runExamples: ReadonlyArray<Example> = [
  {
    says: "Plan and run a goal of two parts on the example session (offline: the local model plans one step a part):",
    command:
      'ctxo run --data fixtures/data --session code-agent-auth "List what the fix changes, then draft the release note"'
  },
  {
    says: "The final state as JSON (plan history, results, reflections):",
    command: 'ctxo run -s code-agent-auth --key release-1 --json "Draft the 1.4.1 release note"'
  }
]
