import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Layer, Option } from "effect"

/** Looks like `gpt-4o` or `gpt-4o,claude-sonnet-4-5`: model names, not a path to a JSON file. */
const looksLikeModelNames = (value: string) =>
  !/\.json$/i.test(value) && !/[\\/]/.test(value) && /^[\w.:@-]+(\s*,\s*[\w.:@-]+)*$/.test(value)

/**
 * `--models FILE`, the same in every command: a JSON file of model overrides (the shape of
 * CTXO_MODELS). A value that is no file but reads like model names gets an error that says which
 * option picks models in this command (`hint`), instead of "path must exist".
 */
export const modelsFileOption = (hint: string) =>
  Options.file("models").pipe(
    Options.withPseudoName("FILE"),
    Options.withDescription(
      `A JSON file of model overrides, the shape of CTXO_MODELS: { "models": { "acme/x": { "contextWindow": 8000, "tokenizer": { ... } } }, "fallback": "openai/gpt-4o" }. Applied over the built-in registry and below CTXO_MODELS. ${hint}`
    ),
    Options.optional,
    Options.mapEffect(
      (
        file: Option.Option<string>
      ): Effect.Effect<Option.Option<string>, ValidationError.ValidationError, FileSystem.FileSystem> =>
        Option.isNone(file)
          ? Effect.succeed(file)
          : Effect.gen(function* () {
              const fs = yield* FileSystem.FileSystem
              const exists = yield* fs.exists(file.value).pipe(Effect.orElseSucceed(() => false))
              if (exists) return file
              const message = looksLikeModelNames(file.value)
                ? `--models takes a JSON file of model overrides, and '${file.value}' is not a file. ${hint}`
                : `--models: no such file '${file.value}' (a JSON file of model overrides)`
              return yield* Effect.fail(ValidationError.invalidValue(HelpDoc.p(message)))
            })
    )
  )

/** `--models FILE` of compile, preview, count and models. */
export const modelsFile = modelsFileOption("To choose the model itself, use --model (-m).")

/** The model registry from the defaults, the `--models` file, then CTXO_MODELS and CTXO_FALLBACK_MODEL. */
export const registryLayer = (file: Option.Option<string>) =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const files = Option.isSome(file)
        ? [{ origin: file.value, text: yield* fs.readFileString(file.value) }]
        : []
      return ModelRegistry.layerConfig(files)
    })
  )
