/**
 * Token counting the way each model counts.
 *
 * `counter(model)` gives a synchronous `Counter` for a resolved model:
 * - models with a local tokenizer (OpenAI's o200k_base, cl100k_base) are counted exactly, equal
 *   to tiktoken's `encode_ordinary`;
 * - the others (Anthropic, Gemini, Llama, ...) are estimated: cl100k_base × the family factor ×
 *   a correction learned from the usage providers report (`observeUsage`). Estimates say so
 *   (`method: "estimate"`) and carry a safety `margin` taken from the measured error.
 *
 * Encoders are created once per layer (lazily, per encoding) and released when its scope closes.
 * Counts go through a cache keyed by content hash, bounded, with an observable hit ratio.
 * Corrections are plain data: whoever owns state persists `corrections` and passes them back in.
 */
import { Context, Effect, Layer, Schema } from "effect"
import type { ChatMessage, ToolDefinition } from "./ChatFormat.ts"
import { countRequest } from "./ChatFormat.ts"
import type { CacheStats } from "./internal/CountCache.ts"
import { CountCache } from "./internal/CountCache.ts"
import type { Engine, EngineName } from "./internal/engines.ts"
import { makeEngine } from "./internal/engines.ts"
import type { Encoding, ModelInfo } from "./ModelRegistry.ts"

export type { CacheStats } from "./internal/CountCache.ts"
export type { EngineName } from "./internal/engines.ts"

export interface Counter {
  readonly model: string
  /** e.g. `o200k_base`, or `estimate:anthropic (cl100k_base × 1.300)`. */
  readonly tokenizer: string
  readonly method: "exact" | "estimate"
  /** Fraction of a budget to keep free because counts are estimates (0 for exact counts). */
  readonly margin: number
  /** Tokens of one text, as ordinary text (special-token strings are just characters). */
  readonly count: (text: string) => number
  /** Tokens of a whole chat request: texts plus the provider's framing (see `ChatFormat`). */
  readonly countMessages: (
    messages: ReadonlyArray<ChatMessage>,
    options?: { readonly tools?: ReadonlyArray<ToolDefinition> }
  ) => number
}

export const Correction = Schema.Struct({
  /** Learned multiplier over the model's estimate, in [MIN_FACTOR, MAX_FACTOR]. */
  factor: Schema.Number,
  observations: Schema.Int,
  /** Recent relative errors, `actual / estimated - 1`, newest last (at most RESIDUALS kept). */
  residuals: Schema.Array(Schema.Number)
})
export type Correction = typeof Correction.Type

export const Corrections = Schema.Record({ key: Schema.String, value: Correction })
export type Corrections = typeof Corrections.Type

export const MIN_FACTOR = 0.5
export const MAX_FACTOR = 2
const LEARNING_RATE = 0.3
const RESIDUALS = 32
const MAX_MODELS = 512
/** Margin for an estimate before enough usage has been observed. */
export const DEFAULT_ESTIMATE_MARGIN = 0.1
const MIN_ESTIMATE_MARGIN = 0.02
const MAX_ESTIMATE_MARGIN = 0.5
const MIN_OBSERVATIONS_FOR_MARGIN = 5

export interface TokenizerOptions {
  /** Exact engine (default `gpt-tokenizer`, the fastest with tiktoken-identical counts). */
  readonly engine?: EngineName
  /** Entries in the count cache, per encoding (default 100,000; 0 turns caching off). */
  readonly cacheCapacity?: number
  /** Corrections persisted from an earlier run. */
  readonly corrections?: Corrections
}

export interface Service {
  readonly counter: (model: ModelInfo) => Effect.Effect<Counter>
  /** The same counter, made at once: for a path that runs no Effect per request (the gateway's proxy). */
  readonly counterNow: (model: ModelInfo) => Counter
  /** Learn from a provider's reported usage: `estimated` is what we counted for the request, `actual` what it billed. */
  readonly observeUsage: (model: ModelInfo, estimated: number, actual: number) => Effect.Effect<Correction>
  readonly corrections: Effect.Effect<Corrections>
  readonly cacheStats: Effect.Effect<CacheStats>
}

export class Tokenizer extends Context.Tag("@ctxo/budget/Tokenizer")<Tokenizer, Service>() {}

const clamp = (value: number, min: number, max: number) => Math.min(max, Math.max(min, value))

/** The 90th percentile of under-estimation, bounded: what an estimate must leave free. */
export const marginOf = (correction: Correction | undefined): number => {
  if (correction === undefined || correction.observations < MIN_OBSERVATIONS_FOR_MARGIN)
    return DEFAULT_ESTIMATE_MARGIN
  const sorted = [...correction.residuals].sort((a, b) => a - b)
  const p90 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.9))] ?? 0
  return clamp(p90, MIN_ESTIMATE_MARGIN, MAX_ESTIMATE_MARGIN)
}

/** One learning step: move the factor towards `actual / estimated` (in log space), bounded. */
export const learn = (previous: Correction | undefined, estimated: number, actual: number): Correction => {
  const base = previous ?? { factor: 1, observations: 0, residuals: [] }
  if (!(estimated > 0) || !(actual > 0)) return base
  const ratio = actual / estimated
  return {
    factor: clamp(base.factor * ratio ** LEARNING_RATE, MIN_FACTOR, MAX_FACTOR),
    observations: base.observations + 1,
    residuals: [...base.residuals, ratio - 1].slice(-RESIDUALS)
  }
}

/**
 * A tokenizer service without Effect's scope, for tests and scripts: call `dispose` when done.
 * `layer` wraps this with the scope that disposes it.
 */
export const makeUnsafe = (options: TokenizerOptions = {}): Service & { readonly dispose: () => void } => {
  const engineName = options.engine ?? "gpt-tokenizer"
  const engines = new Map<Encoding, { readonly engine: Engine; readonly cache: CountCache }>()
  const cacheCapacity = options.cacheCapacity ?? 100_000
  const corrections = new Map<string, Correction>(Object.entries(options.corrections ?? {}))

  const engine = (encoding: Encoding) => {
    let found = engines.get(encoding)
    if (found === undefined) {
      found = { engine: makeEngine(engineName, encoding), cache: new CountCache(cacheCapacity) }
      engines.set(encoding, found)
    }
    return found
  }
  const exactCount = (encoding: Encoding) => {
    const { engine: e, cache } = engine(encoding)
    return (text: string) => (text === "" ? 0 : cache.getOrCompute(text, e.count))
  }

  const makeCounter = (model: ModelInfo): Counter => {
    const spec = model.tokenizer
    if (spec.kind === "exact") {
      const count = exactCount(spec.encoding)
      const legacyFunctions = spec.encoding === "cl100k_base"
      return {
        model: model.id,
        tokenizer: spec.encoding,
        method: "exact",
        margin: 0,
        count,
        countMessages: (messages, o) =>
          countRequest(messages, count, {
            format: model.chatFormat,
            legacyFunctions,
            ...(o?.tools ? { tools: o.tools } : {})
          })
      }
    }
    const base = exactCount("cl100k_base")
    const correction = corrections.get(model.id)
    const multiplier = spec.factor * (correction?.factor ?? 1)
    const count = (text: string) => Math.ceil(base(text) * multiplier)
    return {
      model: model.id,
      tokenizer: `estimate:${spec.family} (cl100k_base × ${multiplier.toFixed(3)})`,
      method: "estimate",
      margin: marginOf(correction),
      count,
      // Framing is added after scaling the texts: it is the provider's own constant.
      countMessages: (messages, o) =>
        countRequest(messages, count, { format: model.chatFormat, ...(o?.tools ? { tools: o.tools } : {}) })
    }
  }

  return {
    counter: (model) => Effect.sync(() => makeCounter(model)),
    counterNow: makeCounter,
    observeUsage: (model, estimated, actual) =>
      Effect.sync(() => {
        const next = learn(corrections.get(model.id), estimated, actual)
        corrections.delete(model.id)
        corrections.set(model.id, next)
        if (corrections.size > MAX_MODELS) corrections.delete(corrections.keys().next().value!)
        return next
      }),
    corrections: Effect.sync(() => Object.fromEntries(corrections)),
    cacheStats: Effect.sync(() => {
      const all = [...engines.values()].map((e) => e.cache.stats())
      const sum = (f: (s: CacheStats) => number) => all.reduce((n, s) => n + f(s), 0)
      const hits = sum((s) => s.hits)
      const misses = sum((s) => s.misses)
      return {
        hits,
        misses,
        size: sum((s) => s.size),
        capacity: sum((s) => s.capacity),
        keyChars: sum((s) => s.keyChars),
        hitRatio: hits + misses === 0 ? 0 : hits / (hits + misses)
      }
    }),
    dispose: () => {
      for (const e of engines.values()) {
        e.engine.dispose()
        e.cache.clear()
      }
      engines.clear()
    }
  }
}

/** The tokenizer for a program's lifetime: encoders are released when the layer's scope closes. */
export const layer = (options: TokenizerOptions = {}): Layer.Layer<Tokenizer> =>
  Layer.scoped(
    Tokenizer,
    Effect.acquireRelease(
      Effect.sync(() => makeUnsafe(options)),
      (service) => Effect.sync(() => service.dispose())
    )
  )
