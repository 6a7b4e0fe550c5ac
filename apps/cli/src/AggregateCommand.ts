/**
 * `ctxo aggregate`: many sessions of a data root into one request for one agent, through the same
 * `@ctxo/agent/Aggregate` the gateway's `POST /api/context/aggregate` calls (each session compiled
 * by the turn engine's preview for the query). A summary for a person by default: the sessions,
 * the blocks kept and dropped with where each comes from, tokens against the budget; `--json` the
 * whole answer (the request among it).
 */
import * as Aggregate from "@ctxo/agent/Aggregate"
import { DEFAULT_MODEL } from "@ctxo/compiler/Compile"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Console, Effect, Option } from "effect"
import type { Example } from "./internal/help.ts"
import { modelsFile } from "./internal/models.ts"
import { dataOption, engineOn } from "./internal/options.ts"

const data = dataOption(
  "The data root: system-prompt.md, sessions.json and one directory per session. Defaults to ./data, the live data root of the gateway (`pnpm start`); pass --data fixtures/data for the example data. Only the root's memory.json is written (the sessions' L2 memories become L3); while a gateway serves the same directory, prefer its HTTP API."
)
const sessions = Options.text("sessions").pipe(
  Options.withPseudoName("ID,ID"),
  Options.withDescription(
    "The sessions to aggregate, comma-separated, in the order their blocks are preferred on ties. An ended session is skipped (and said so)."
  )
)
const query = Options.text("query").pipe(
  Options.withAlias("q"),
  Options.withPseudoName("TEXT"),
  Options.withDescription("The question the agent answers: each session compiles it as its next input.")
)
const model = Options.text("model").pipe(
  Options.withAlias("m"),
  Options.withPseudoName("MODEL"),
  Options.withDescription(
    "The agent's model: its window and tokenizer set the one budget, and every session compiles for it. Defaults to openai/gpt-4o. `ctxo models` lists them."
  ),
  Options.optional
)
const format = Options.choice("format", ["openai", "anthropic", "react"]).pipe(
  Options.withAlias("f"),
  Options.withPseudoName("FORMAT"),
  Options.withDescription("The request's format (with --json): openai (default), anthropic or react."),
  Options.optional
)
const json = Options.boolean("json").pipe(
  Options.withDescription(
    "Print the whole answer as JSON: the request, the budget report, every block, skipped sessions."
  )
)

const provenanceText = (p: Aggregate.Provenance) =>
  [p.session, p.level, p.source, p.ref ?? p.unit].filter((x) => x !== undefined).join(" · ")

/** The answer as a person reads it: the budget, the sessions, each block kept or dropped and where it comes from. */
export const renderAggregate = (r: Aggregate.Aggregated): string => {
  const report = r.report
  const kept = r.blocks.filter((b) => b.status === "included")
  const dropped = r.blocks.filter((b) => b.status === "dropped")
  const shared = r.blocks.filter((b) => b.sessions.length > 1).length
  const lines = [
    `${r.model} (${report.tokenizer.name}, ${report.tokenizer.method}) · ${r.format} · ${r.sessions.length} of ${r.sessions.length + r.skipped.length} sessions`,
    `request ${report.total ?? 0} of ${report.available} available tokens (window ${report.window.tokens}, output reserve ${report.outputReserve}); blocks ${kept.reduce((n, b) => n + b.tokens, 0)} tokens`,
    "",
    "sessions:"
  ]
  for (const s of r.sessions)
    lines.push(
      `  ${s.session.padEnd(24)} ${s.state.padEnd(7)} ${String(s.blocks).padStart(4)} blocks, its request ${s.tokens} tokens${s.withheld > 0 ? `, ${s.withheld} withheld (memory of ended sessions only)` : ""}`
    )
  for (const s of r.skipped) lines.push(`  ${s.session.padEnd(24)} skipped (${s.reason}): ${s.message}`)
  lines.push(
    "",
    `blocks: ${kept.length} kept, ${dropped.length} dropped${shared > 0 ? `; ${shared} from several sessions` : ""}`
  )
  const row = (b: Aggregate.AggregateBlock) =>
    `  ${b.id}  ${String(b.tokens).padStart(6)}  ${b.score.toFixed(2).padStart(6)}  ${b.provenance.map(provenanceText).join("; ")}`
  if (kept.length > 0) lines.push("kept (id, tokens, relevance, from):", ...kept.map(row))
  if (dropped.length > 0) {
    lines.push("dropped:")
    for (const b of dropped) lines.push(row(b), `      ${b.reason ?? "dropped"}`)
  }
  if (r.promoted > 0) lines.push("", `memory: ${r.promoted} L3 entries from the sessions' L2`)
  for (const w of r.warnings) lines.push(`warning: ${w}`)
  return lines.join("\n")
}

export const aggregateCommand = Command.make(
  "aggregate",
  { data, sessions, query, model, format, json, models: modelsFile },
  (args) =>
    Effect.gen(function* () {
      const result = yield* Aggregate.aggregate({
        sessions: args.sessions
          .split(",")
          .map((s) => s.trim())
          .filter((s) => s !== ""),
        query: args.query,
        defaultModel: DEFAULT_MODEL,
        ...Option.match(args.model, { onNone: () => ({}), onSome: (m) => ({ model: m }) }),
        ...Option.match(args.format, { onNone: () => ({}), onSome: (f) => ({ format: f }) })
      })
      yield* Console.log(args.json ? JSON.stringify(result, null, 2) : renderAggregate(result))
    }).pipe(
      // The turn engine (for the sessions' previews) and memory on the data root's store.
      Effect.provide(engineOn(args.data, args.models))
    )
).pipe(
  Command.withDescription(
    "Aggregate many sessions into one request for one agent: each session compiles the query as its next input, their blocks are merged (the same content once, with every session it came from), ranked by relevance to the query and cut, whole, to the model's budget beside the system prompt and the query. Prints the sessions, the blocks kept and dropped with their provenance, and the tokens against the budget; --json the whole answer."
  )
)

export const aggregateExamples: ReadonlyArray<Example> = [
  {
    says: "What the two example sessions give an agent asking about the login bug:",
    command:
      "ctxo aggregate --data fixtures/data --sessions code-agent-auth,notebook-physics --query 'What broke the login?'"
  },
  {
    says: "The whole answer, the request in Anthropic's format, for jq:",
    command:
      "ctxo aggregate --sessions code-agent-auth,notebook-physics -q 'What broke the login?' -m claude-sonnet-4-5 -f anthropic --json | jq .request"
  }
]
