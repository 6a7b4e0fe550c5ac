import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Options from "@effect/cli/Options"
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Layer, Option } from "effect"

/** `--models FILE`: model overrides in a JSON file (same shape as CTXO_MODELS). */
export const modelsFile = Options.file("models", { exists: "yes" }).pipe(
  Options.withDescription(
    "A JSON file of model overrides ({ models: { 'acme/x': { contextWindow, ... } }, fallback })"
  ),
  Options.optional
)

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
