import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as FileSystem from "@effect/platform/FileSystem"
import { Console, Effect } from "effect"
import { modelsFile, registryLayer } from "./internal/models.ts"

const json = Options.boolean("json").pipe(Options.withDescription("Print JSON"))

export const modelsCommand = Command.make("models", { json, models: modelsFile }, (args) =>
  Effect.gen(function* () {
    const registry = yield* ModelRegistry.ModelRegistry
    if (args.json) {
      yield* Console.log(JSON.stringify(registry.list, null, 2))
      return
    }
    const k = (n: number) =>
      n >= 1_000_000 ? `${(n / 1_000_000).toFixed(n % 1_000_000 === 0 ? 0 : 2)}M` : `${Math.round(n / 1000)}k`
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
    "List the models ctxo knows: window, max input, max output, tokenizer (--json adds sources)"
  )
)

const files = Args.file({ name: "file", exists: "yes" }).pipe(Args.repeated)
const model = Options.text("model").pipe(
  Options.withAlias("m"),
  Options.withDescription("Model to count for (id, bare name or alias)"),
  Options.withDefault("gpt-4o")
)

export const countCommand = Command.make("count", { files, model, json, models: modelsFile }, (args) =>
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
    "Count the tokens of files the way a model counts them (exact for OpenAI, estimated otherwise)"
  )
)
