import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as FileSystem from "@effect/platform/FileSystem"
import { Console, Effect } from "effect"
import type { Example } from "./internal/help.ts"
import { modelsFile, modelsFileOption, registryLayer } from "./internal/models.ts"

const modelsJson = Options.boolean("json").pipe(
  Options.withDescription(
    "Print the registry as JSON: every model with its aliases, limits, tokenizer and the source (a URL or the models file) of each number."
  )
)

export const modelsCommand = Command.make(
  "models",
  {
    json: modelsJson,
    models: modelsFileOption("To see one model's numbers, grep the table or use --json.")
  },
  (args) =>
    Effect.gen(function* () {
      const registry = yield* ModelRegistry.ModelRegistry
      if (args.json) {
        yield* Console.log(JSON.stringify(registry.list, null, 2))
        return
      }
      const k = (n: number) =>
        n >= 1_000_000
          ? `${(n / 1_000_000).toFixed(n % 1_000_000 === 0 ? 0 : 2)}M`
          : `${Math.round(n / 1000)}k`
      yield* Console.log(
        `${"model".padEnd(42)} ${"window".padStart(7)} ${"input".padStart(7)} ${"output".padStart(7)}  tokenizer`
      )
      for (const m of registry.list) {
        const tokenizer =
          m.tokenizer.kind === "exact"
            ? m.tokenizer.encoding
            : `estimate (${m.tokenizer.family} ×${m.tokenizer.factor})`
        yield* Console.log(
          `${m.id.padEnd(42)} ${k(m.contextWindow).padStart(7)} ${k(m.maxInput).padStart(7)} ${k(m.maxOutput).padStart(7)}  ${tokenizer}`
        )
      }
    }).pipe(Effect.provide(registryLayer(args.models)))
).pipe(
  Command.withDescription(
    "List the model registry: each model's context window, max input, max output and tokenizer (exact encoding or estimate), after the --models file, CTXO_MODELS and CTXO_FALLBACK_MODEL."
  )
)

export const modelsExamples: ReadonlyArray<Example> = [
  { says: "The built-in registry:", command: "ctxo models" },
  {
    says: "With your overrides, as JSON with the source of every number:",
    command: "ctxo models --models models.json --json"
  }
]

const files = Args.file({ name: "file", exists: "yes" }).pipe(
  Args.withDescription("The files to count, read as UTF-8 text (one or more)."),
  Args.atLeast(1)
)
const model = Options.text("model").pipe(
  Options.withAlias("m"),
  Options.withPseudoName("MODEL"),
  Options.withDescription(
    "The model whose tokenizer counts: a registry id, a bare name or an alias. Defaults to gpt-4o."
  ),
  Options.withDefault("gpt-4o")
)
const countJson = Options.boolean("json").pipe(
  Options.withDescription(
    "Print JSON: the model, its tokenizer, whether counts are exact or estimates, and each file's tokens and share of the max input."
  )
)

export const countCommand = Command.make(
  "count",
  { files, model, json: countJson, models: modelsFile },
  (args) =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const registry = yield* ModelRegistry.ModelRegistry
      const tokenizer = yield* Tokenizer.Tokenizer
      const resolved = yield* registry.resolve(args.model)
      const counter = yield* tokenizer.counter(resolved)
      const rows = []
      for (const file of args.files) {
        const tokens = counter.count(yield* fs.readFileString(file))
        rows.push({ file, tokens, share: tokens / resolved.maxInput })
      }
      if (args.json) {
        yield* Console.log(
          JSON.stringify(
            { model: resolved.id, tokenizer: counter.tokenizer, method: counter.method, files: rows },
            null,
            2
          )
        )
        return
      }
      if (resolved.fallback !== undefined) yield* Console.error(`warning: ${resolved.fallback}`)
      const approx = counter.method === "estimate" ? "~" : ""
      yield* Console.log(
        `${resolved.id}: ${counter.tokenizer}, max input ${resolved.maxInput} (${resolved.sources.maxInput})`
      )
      for (const row of rows) {
        yield* Console.log(
          `${approx}${row.tokens}`.padStart(9) + `  ${(row.share * 100).toFixed(2).padStart(6)}%  ${row.file}`
        )
      }
      if (rows.length > 1) {
        const total = rows.reduce((n, r) => n + r.tokens, 0)
        yield* Console.log(
          `${approx}${total}`.padStart(9) +
            `  ${((total / resolved.maxInput) * 100).toFixed(2).padStart(6)}%  total`
        )
      }
    }).pipe(Effect.provide(registryLayer(args.models)), Effect.provide(Tokenizer.layer()))
).pipe(
  Command.withDescription(
    "Count the tokens of files the way a model counts them: exact for OpenAI encodings, an estimate (marked ~) for the rest, with each file's share of the model's max input."
  )
)

export const countExamples: ReadonlyArray<Example> = [
  {
    says: "Two files for Claude (an estimate, marked ~):",
    command: "ctxo count fixtures/docs/profile.md fixtures/docs/guidance.md -m claude-sonnet-4-5"
  },
  { says: "Exact counts for gpt-4o, as JSON:", command: "ctxo count fixtures/docs/profile.md --json" }
]
