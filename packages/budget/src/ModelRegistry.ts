/**
 * What each model can take: provider-qualified ids (`openai/gpt-4o`) and aliases to the context
 * window, the max input (kept apart: gpt-5 is 400k total but 272k input), the max output, the
 * tokenizer, and where each number came from.
 *
 * Defaults cover current OpenAI, Anthropic, Google, Meta, Mistral, Qwen and DeepSeek models
 * (`internal/defaultModels.ts`, each number with its source). Overrides come as JSON, from a
 * models file (read by the app) and from `CTXO_MODELS`; the later wins field by field and the
 * report names it. A name that resolves to no model is an `UnknownModel` error, unless a fallback
 * model is configured (`CTXO_FALLBACK_MODEL`): then its limits apply and the resolution says so.
 *
 * Names resolve case-insensitively by id, bare name (`gpt-4o`), alias, a dated or `-latest`
 * snapshot of a known name (`claude-sonnet-4-5-20250929`), or another provider prefix
 * (`meta-llama/llama-3.3-70b-instruct`).
 */
import { problemOf } from "@ctxo/store/DecodeError"
import { Config, Context, Effect, Either, Layer, Option, Schema } from "effect"
import { InvalidModelConfig, UnknownModel } from "./BudgetErrors.ts"
import { defaultModels } from "./internal/defaultModels.ts"

export const Encoding = Schema.Literal("o200k_base", "cl100k_base")
export type Encoding = typeof Encoding.Type

export const TokenizerSpec = Schema.Union(
  Schema.Struct({ kind: Schema.Literal("exact"), encoding: Encoding }),
  Schema.Struct({
    kind: Schema.Literal("estimate"),
    family: Schema.String,
    /** Initial multiplier over cl100k_base counts, before learned corrections. */
    factor: Schema.Number.pipe(Schema.positive())
  })
)
export type TokenizerSpec = typeof TokenizerSpec.Type

/** How the provider frames messages (decides the per-message overhead, see `ChatFormat`). */
export const ChatFormatName = Schema.Literal("openai", "anthropic", "llama3", "generic")
export type ChatFormatName = typeof ChatFormatName.Type

const PositiveInt = Schema.Int.pipe(Schema.positive())

export const ModelInfo = Schema.Struct({
  id: Schema.String,
  provider: Schema.String,
  name: Schema.String,
  aliases: Schema.Array(Schema.String),
  contextWindow: PositiveInt,
  maxInput: PositiveInt,
  maxOutput: PositiveInt,
  tokenizer: TokenizerSpec,
  chatFormat: ChatFormatName,
  /** Where each number came from: a documentation URL, or the override that set it. */
  sources: Schema.Struct({
    contextWindow: Schema.String,
    maxInput: Schema.String,
    maxOutput: Schema.String,
    tokenizer: Schema.String
  })
})
export type ModelInfo = typeof ModelInfo.Type

/** A model as a request named it: the model's facts, plus how the name was matched. */
export interface ResolvedModel extends ModelInfo {
  readonly requested: string
  /** Set when the name is unknown and the configured fallback model's limits were used. */
  readonly fallback?: string
}

export const ModelOverride = Schema.Struct({
  provider: Schema.optional(Schema.String),
  contextWindow: Schema.optional(PositiveInt),
  maxInput: Schema.optional(PositiveInt),
  maxOutput: Schema.optional(PositiveInt),
  tokenizer: Schema.optional(TokenizerSpec),
  chatFormat: Schema.optional(ChatFormatName),
  aliases: Schema.optional(Schema.Array(Schema.String))
})
export type ModelOverride = typeof ModelOverride.Type

/** The JSON of a models file or of `CTXO_MODELS`. */
export const ModelsConfig = Schema.Struct({
  fallback: Schema.optional(Schema.String),
  models: Schema.optional(Schema.Record({ key: Schema.String, value: ModelOverride }))
})
export type ModelsConfig = typeof ModelsConfig.Type

export interface ModelRegistryOptions {
  /** Applied in order, later ones winning field by field; `origin` names each in the sources. */
  readonly overrides?: ReadonlyArray<{ readonly origin: string; readonly config: ModelsConfig }>
  /** Model whose limits apply to names the registry does not know (default: none, unknown is an error). */
  readonly fallback?: string
}

export interface Service {
  readonly resolve: (model: string) => Effect.Effect<ResolvedModel, UnknownModel>
  readonly list: ReadonlyArray<ModelInfo>
  readonly fallback: Option.Option<string>
}

export class ModelRegistry extends Context.Tag("@ctxo/budget/ModelRegistry")<ModelRegistry, Service>() {}

const decodeConfig = Schema.decodeUnknownEither(Schema.parseJson(ModelsConfig))

/** Parses the JSON of a models file or of `CTXO_MODELS`; errors name the origin and the field. */
export const parseModelsConfig = (
  text: string,
  origin: string
): Either.Either<ModelsConfig, InvalidModelConfig> =>
  decodeConfig(text).pipe(
    Either.mapLeft((error) => new InvalidModelConfig({ origin, reason: problemOf(error) }))
  )

const SNAPSHOT_SUFFIX = /^(.+?)-(\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|latest)$/

const applyOverride = (
  id: string,
  base: ModelInfo | undefined,
  override: ModelOverride,
  origin: string
): Either.Either<ModelInfo, InvalidModelConfig> => {
  const fail = (reason: string) =>
    Either.left(new InvalidModelConfig({ origin, reason: `models["${id}"]: ${reason}` }))
  const slash = id.indexOf("/")
  if (slash <= 0 || slash === id.length - 1)
    return fail("model ids are provider-qualified, like openai/gpt-4o")
  const contextWindow = override.contextWindow ?? base?.contextWindow
  const tokenizer = override.tokenizer ?? base?.tokenizer
  if (contextWindow === undefined) return fail("a new model needs contextWindow")
  if (tokenizer === undefined)
    return fail(
      `a new model needs tokenizer, e.g. "tokenizer": { "kind": "exact", "encoding": "o200k_base" } (or "cl100k_base"), or { "kind": "estimate", "family": "${id.slice(0, Math.max(slash, 0))}", "factor": 1.2 } to count with cl100k_base times a margin`
    )
  const windowChanged = override.contextWindow !== undefined
  const maxInput = override.maxInput ?? (windowChanged || base === undefined ? contextWindow : base.maxInput)
  const maxOutput =
    override.maxOutput ?? (windowChanged || base === undefined ? contextWindow : base.maxOutput)
  if (maxInput > contextWindow) return fail(`maxInput ${maxInput} exceeds contextWindow ${contextWindow}`)
  if (maxOutput > contextWindow) return fail(`maxOutput ${maxOutput} exceeds contextWindow ${contextWindow}`)
  const from = (field: keyof ModelInfo["sources"], set: boolean) =>
    set ? origin : (base?.sources[field] ?? origin)
  return Either.right({
    id,
    provider: override.provider ?? base?.provider ?? id.slice(0, slash),
    name: base?.name ?? id.slice(slash + 1),
    aliases: [...(base?.aliases ?? []), ...(override.aliases ?? [])],
    contextWindow,
    maxInput,
    maxOutput,
    tokenizer,
    chatFormat: override.chatFormat ?? base?.chatFormat ?? "generic",
    sources: {
      contextWindow: from("contextWindow", windowChanged),
      maxInput: from("maxInput", override.maxInput !== undefined || windowChanged),
      maxOutput: from("maxOutput", override.maxOutput !== undefined || windowChanged),
      tokenizer: from("tokenizer", override.tokenizer !== undefined)
    }
  })
}

const commonPrefix = (a: string, b: string) => {
  let i = 0
  while (i < a.length && i < b.length && a[i] === b[i]) i++
  return i
}

/** Builds a registry from the defaults and the overrides; invalid overrides are an error naming their origin. */
export const make = (options: ModelRegistryOptions = {}): Either.Either<Service, InvalidModelConfig> => {
  const models = new Map<string, ModelInfo>(defaultModels.map((m) => [m.id, m]))
  let fallbackName = options.fallback
  for (const { origin, config } of options.overrides ?? []) {
    for (const [id, override] of Object.entries(config.models ?? {})) {
      const merged = applyOverride(id, models.get(id), override, origin)
      if (Either.isLeft(merged)) return Either.left(merged.left)
      models.set(id, merged.right)
    }
    if (config.fallback !== undefined) fallbackName ??= config.fallback
  }

  const list = [...models.values()]
  const index = new Map<string, ModelInfo>()
  const bareNames = new Map<string, Array<ModelInfo>>()
  for (const model of list) {
    index.set(model.id.toLowerCase(), model)
    for (const alias of model.aliases) index.set(alias.toLowerCase(), model)
    const bare = model.name.toLowerCase()
    bareNames.set(bare, [...(bareNames.get(bare) ?? []), model])
  }
  // A bare name is an alias only when one provider has it.
  for (const [bare, owners] of bareNames)
    if (owners.length === 1 && !index.has(bare)) index.set(bare, owners[0]!)

  const lookup = (name: string): ModelInfo | undefined => {
    const key = name.trim().toLowerCase()
    const direct = index.get(key)
    if (direct !== undefined) return direct
    const snapshot = SNAPSHOT_SUFFIX.exec(key)
    if (snapshot !== null) {
      const base = lookup(snapshot[1]!)
      if (base !== undefined) return base
    }
    const slash = key.lastIndexOf("/")
    return slash === -1 ? undefined : lookup(key.slice(slash + 1))
  }

  const fallbackModel = fallbackName === undefined ? undefined : lookup(fallbackName)
  if (fallbackName !== undefined && fallbackModel === undefined) {
    return Either.left(
      new InvalidModelConfig({ origin: "fallback model", reason: `"${fallbackName}" is not a known model` })
    )
  }

  // A registry does not change once made, and every compile and proxied call resolves its model: a
  // name resolved once is kept (1,024 names at most). An unknown one is asked again for suggestions.
  const resolved = new Map<string, Effect.Effect<ResolvedModel>>()
  const keep = (requested: string, model: ResolvedModel) => {
    const effect = Effect.succeed(model)
    if (resolved.size >= 1024) resolved.clear()
    resolved.set(requested, effect)
    return effect
  }
  const resolve = (requested: string): Effect.Effect<ResolvedModel, UnknownModel> => {
    const kept = resolved.get(requested)
    if (kept !== undefined) return kept
    const found = lookup(requested)
    if (found !== undefined) return keep(requested, { ...found, requested })
    if (fallbackModel !== undefined) {
      return keep(requested, {
        ...fallbackModel,
        requested,
        fallback: `unknown model "${requested}": using the limits of ${fallbackModel.id} (fallback model)`
      })
    }
    const key = requested.trim().toLowerCase()
    const suggestions = [...index.keys()]
      .map((name) => ({ name, score: commonPrefix(name, key) }))
      .filter((s) => s.score >= 3)
      .sort((a, b) => b.score - a.score || a.name.localeCompare(b.name))
      .slice(0, 3)
      .map((s) => index.get(s.name)!.id)
    return Effect.fail(new UnknownModel({ model: requested, suggestions: [...new Set(suggestions)] }))
  }

  return Either.right({ resolve, list, fallback: Option.fromNullable(fallbackModel?.id) })
}

export const layer = (options: ModelRegistryOptions = {}): Layer.Layer<ModelRegistry, InvalidModelConfig> =>
  Layer.effect(ModelRegistry, make(options))

/**
 * The registry from configuration: `files` (already read by the app, e.g. a `--models` file),
 * then `CTXO_MODELS` (JSON, same shape), and `CTXO_FALLBACK_MODEL`.
 */
export const layerConfig = (
  files: ReadonlyArray<{ readonly origin: string; readonly text: string }> = []
): Layer.Layer<ModelRegistry, InvalidModelConfig | import("effect/ConfigError").ConfigError> =>
  Layer.effect(
    ModelRegistry,
    Effect.gen(function* () {
      const env = yield* Config.option(Config.string("CTXO_MODELS"))
      const fallback = yield* Config.option(Config.string("CTXO_FALLBACK_MODEL"))
      const texts = [
        ...files,
        ...Option.toArray(Option.map(env, (text) => ({ origin: "CTXO_MODELS", text })))
      ]
      const overrides: Array<{ origin: string; config: ModelsConfig }> = []
      for (const { origin, text } of texts)
        overrides.push({ origin, config: yield* parseModelsConfig(text, origin) })
      return yield* make({
        overrides,
        ...Option.match(fallback, { onNone: () => ({}), onSome: (f) => ({ fallback: f }) })
      })
    })
  )
