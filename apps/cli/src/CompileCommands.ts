import * as Tokenizer from "@ctxo/budget/Tokenizer"
import type { CompileResult } from "@ctxo/compiler/Compile"
import { compile } from "@ctxo/compiler/Compile"
import * as Workspace from "@ctxo/compiler/Workspace"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Console, Effect, Layer, Option } from "effect"
import { modelsFile, registryLayer } from "./internal/models.ts"

const data = Options.directory("data", { exists: "yes" }).pipe(
  Options.withDescription("The data root: profile.md, system-prompt.md and one directory per session"),
  Options.withDefault("data")
)
const session = Options.text("session").pipe(
  Options.withAlias("s"),
  Options.withDescription("The session id (its directory in the data root)")
)
const query = Options.text("query").pipe(
  Options.withAlias("q"),
  Options.withDescription("The new user input (default: the manifest's query)"),
  Options.optional
)
const model = Options.text("model").pipe(
  Options.withAlias("m"),
  Options.withDescription("The target model (default: the manifest's, else openai/gpt-4o)"),
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
  compile({
    sessionId: args.session,
    ...Option.match(args.query, { onNone: () => ({}), onSome: (q) => ({ query: q }) }),
    ...Option.match(args.model, { onNone: () => ({}), onSome: (m) => ({ model: m }) }),
    ...(args.format === undefined ? {} : { format: args.format })
  }).pipe(
    Effect.provide(Layer.mergeAll(Workspace.layer(args.data), registryLayer(args.models), Tokenizer.layer()))
  )

const format = Options.choice("format", ["openai", "anthropic", "react", "json"]).pipe(
  Options.withAlias("f"),
  Options.withDescription(
    "openai, anthropic or react: the request; json: the request with its budget report"
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
).pipe(Command.withDescription("Compile a session's next request for a model and print it as JSON"))

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
    "Show what a compile puts in: layers, tokens, a bar per layer, and every cut with its reason"
  )
)
