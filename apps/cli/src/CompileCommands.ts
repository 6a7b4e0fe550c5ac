import { agentTools } from "@ctxo/agent/Tools"
import * as TurnEngine from "@ctxo/agent/TurnEngine"
import type { CompileResult } from "@ctxo/compiler/Compile"
import { DEFAULT_MODEL } from "@ctxo/compiler/Compile"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Console, Effect, Option } from "effect"
import type { Example } from "./internal/help.ts"
import { modelsFile } from "./internal/models.ts"
import { dataOption, engineOn } from "./internal/options.ts"

const data = dataOption(
  "The data root to read: profile.md, system-prompt.md, sessions.json and one directory per session. Defaults to ./data, the live data root of the gateway (`pnpm start`); pass --data fixtures/data for the example data. Nothing is written."
)
const session = Options.text("session").pipe(
  Options.withAlias("s"),
  Options.withPseudoName("ID"),
  Options.withDescription(
    "The session to compile: its directory name in the data root (as listed in sessions.json), e.g. code-agent-auth."
  )
)
const query = Options.text("query").pipe(
  Options.withAlias("q"),
  Options.withPseudoName("TEXT"),
  Options.withDescription(
    "The new user input, with its inline references ([file:12:30], [file#Heading]) and @file mentions. Without it: the manifest's query, else the session's running turn."
  ),
  Options.optional
)
const model = Options.text("model").pipe(
  Options.withAlias("m"),
  Options.withPseudoName("MODEL"),
  Options.withDescription(
    "The target model: a registry id (openai/gpt-4o), a bare name (gpt-4o) or an alias; its window and tokenizer set the budget. Defaults to the manifest's model, else openai/gpt-4o. `ctxo models` lists them."
  ),
  Options.optional
)

const run = (args: {
  readonly data: string
  readonly session: string
  readonly query: Option.Option<string>
  readonly model: Option.Option<string>
  readonly format?: "openai" | "anthropic" | "react"
  readonly models: Option.Option<string>
}) =>
  // What the session's next turn would send first, as the turn engine compiles it (the gateway's
  // preview and chat run the same engine over the same store).
  Effect.flatMap(TurnEngine.TurnEngine, (engine) =>
    engine.preview({
      sessionId: args.session,
      defaultModel: DEFAULT_MODEL,
      // The agent's tools, as a chat turn offers them (on demand, counted).
      tools: agentTools,
      ...Option.match(args.query, { onNone: () => ({}), onSome: (q) => ({ input: q }) }),
      ...Option.match(args.model, { onNone: () => ({}), onSome: (m) => ({ model: m }) }),
      ...(args.format === undefined ? {} : { format: args.format })
    })
  ).pipe(
    // The engine as a turn compiles (memory a source of every compile, as in the gateway; a
    // preview compacts and records nothing).
    Effect.provide(engineOn(args.data, args.models))
  )

const format = Options.choice("format", ["openai", "anthropic", "react", "json"]).pipe(
  Options.withAlias("f"),
  Options.withPseudoName("FORMAT"),
  Options.withDescription(
    "What to print: openai (chat messages), anthropic (Messages API: one system, alternating roles) or react (the ReAct text) prints the request in that format; json prints the whole result: the request, its layers, the budget report with every unit and cut, the prefix hash. Defaults to the format of the model's provider."
  ),
  Options.optional
)

export const compileCommand = Command.make(
  "compile",
  { data, session, query, model, format, models: modelsFile },
  (args) =>
    Effect.gen(function* () {
      const chosen = Option.getOrUndefined(args.format)
      const result = yield* run({
        data: args.data,
        session: args.session,
        query: args.query,
        model: args.model,
        models: args.models,
        ...(chosen === undefined || chosen === "json" ? {} : { format: chosen })
      })
      for (const warning of result.warnings) yield* Console.error(`warning: ${warning}`)
      const { composition: _, state: __, ...rest } = result
      yield* Console.log(JSON.stringify(chosen === "json" ? rest : result.request, null, 2))
    })
).pipe(
  Command.withDescription(
    "Compile a session's next request for a model, under the model's token budget, and print it as JSON (the request only, or with --format json the budget report too). Reads the data root, writes nothing."
  )
)

export const compileExamples: ReadonlyArray<Example> = [
  {
    says: "The request the example session would send next, for its own model:",
    command: "ctxo compile --data fixtures/data --session code-agent-auth"
  },
  {
    says: "A new question, compiled for another model in Anthropic's format:",
    command:
      "ctxo compile --data fixtures/data -s code-agent-auth -q 'What does src/auth.ts do?' -m claude-sonnet-4-5 -f anthropic"
  },
  {
    says: "The budget report (layers, units, cuts) as JSON, for jq:",
    command: "ctxo compile --data fixtures/data -s code-agent-auth -f json | jq .report"
  }
]

const bar = (tokens: number, available: number, width = 30) => {
  const filled = available === 0 ? 0 : Math.round((tokens / available) * width)
  return `${"█".repeat(Math.min(width, filled))}${"·".repeat(Math.max(0, width - filled))}`
}

/** The compile as a person reads it: layers with tokens and a bar each, then every cut and why. */
export const renderPreview = (result: CompileResult): string => {
  const { report, composition } = result
  const lines = [
    `${result.model} (${report.tokenizer.name}, ${report.tokenizer.method}) · ${result.format} · policy ${composition.policy}`,
    `request ${report.total ?? 0} of ${report.available} available tokens (window ${report.window.tokens}, output reserve ${report.outputReserve})`,
    `prefix ${result.prefix.hash}: ${result.prefix.tokens} tokens of static layers`,
    ""
  ]
  for (const layer of result.layers) {
    const label = layer.messages === undefined ? layer.id : `${layer.id} (${layer.messages} messages)`
    lines.push(
      `${label.padEnd(34)} ${String(layer.tokens).padStart(7)}  ${bar(layer.tokens, report.available)}`
    )
  }
  const cuts = report.units.filter((u) => u.status !== "included")
  lines.push("", cuts.length === 0 ? "nothing cut" : `cut (${cuts.length}):`)
  for (const u of cuts) lines.push(`  ${u.source}/${u.id}: ${u.tokens} tokens, ${u.reason ?? u.status}`)
  for (const w of result.warnings) lines.push(`warning: ${w}`)
  return lines.join("\n")
}

export const previewCommand = Command.make(
  "preview",
  { data, session, query, model, models: modelsFile },
  (args) =>
    Effect.gen(function* () {
      yield* Console.log(renderPreview(yield* run(args)))
    })
).pipe(
  Command.withDescription(
    "Show what a compile puts in, for a person: the model and its budget, each layer with its tokens and a bar, the static prefix, and every cut with its reason. Takes the options of compile."
  )
)

export const previewExamples: ReadonlyArray<Example> = [
  {
    says: "The layers of the example code-agent session and what was cut:",
    command: "ctxo preview --data fixtures/data --session code-agent-auth"
  },
  {
    says: "The same session on a small model, with a models file that defines it:",
    command: "ctxo preview --data fixtures/data -s code-agent-auth -m acme/small --models models.json"
  }
]
