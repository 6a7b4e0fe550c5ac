/**
 * Text -> vectors for the semantic half of hybrid ranking.
 *
 * Layers: `layerOpenAI` / `layerOpenAIConfig` (the `embeddings` endpoint of any OpenAI-compatible
 * server through the openai SDK, batched) and `layerHashed` (a local, deterministic stand-in: a
 * hashed bag of words and character n-grams. It is not a semantic model; it lets tests, benchmarks
 * and offline runs exercise the hybrid path without a network).
 *
 * `model` names the vector space: vectors are only ever compared with vectors of the same `model`.
 */
import { Config, Context, Effect, Layer, Option, Redacted } from "effect"
import type OpenAI from "openai"
import { analyze } from "./Analyzer.ts"
import { EmbeddingError } from "./RetrievalErrors.ts"

export type Vector = ReadonlyArray<number>

export interface Service {
  /** The vector space: a model name (plus dimensions when they are not the model's default). */
  readonly model: string
  /** One vector per text, in order. */
  readonly embed: (texts: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<Vector>, EmbeddingError>
}

export class Embedder extends Context.Tag("@ctxo/retrieval/Embedder")<Embedder, Service>() {}

export interface OpenAIEmbedderOptions {
  readonly baseURL?: string
  readonly apiKey: Redacted.Redacted<string> | string
  readonly model: string
  /** Texts per request (default 64). */
  readonly batchSize?: number
  /** Requests in flight at once (default 2). */
  readonly concurrency?: number
  /** Ask for shorter vectors (models that support it). */
  readonly dimensions?: number
  readonly maxRetries?: number
  readonly timeoutMs?: number
}

export const DEFAULT_BATCH_SIZE = 64

const reasonOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

export const makeOpenAI = (options: OpenAIEmbedderOptions): Service => {
  // The SDK is loaded by the first call, not when the layer is built: a gateway's start does not
  // parse it.
  let client: Promise<OpenAI> | undefined
  const clientNow = () =>
    (client ??= import("openai").then(
      ({ default: OpenAI }) =>
        new OpenAI({
          apiKey: typeof options.apiKey === "string" ? options.apiKey : Redacted.value(options.apiKey),
          ...(options.baseURL === undefined ? {} : { baseURL: options.baseURL }),
          maxRetries: options.maxRetries ?? 2,
          ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs })
        })
    ))
  const model = options.dimensions === undefined ? options.model : `${options.model}@${options.dimensions}`
  const batchSize = Math.max(1, options.batchSize ?? DEFAULT_BATCH_SIZE)
  const fail = (reason: string) => new EmbeddingError({ model, reason })

  const embedBatch = (batch: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      const response = yield* Effect.tryPromise({
        try: (signal) =>
          clientNow().then((client) =>
            client.embeddings.create(
              {
                model: options.model,
                input: [...batch],
                // Plain floats: every OpenAI-compatible server speaks them (base64 is OpenAI's extension).
                encoding_format: "float",
                ...(options.dimensions === undefined ? {} : { dimensions: options.dimensions })
              },
              { signal }
            )
          ),
        catch: (error) => fail(reasonOf(error))
      })
      const data = Array.isArray(response?.data) ? response.data : []
      if (data.length !== batch.length) {
        return yield* fail(`asked for ${batch.length} vectors, got ${data.length}`)
      }
      const vectors: Array<Vector> = new Array(batch.length)
      for (const [position, item] of data.entries()) {
        const at = typeof item.index === "number" ? item.index : position
        if (!Array.isArray(item.embedding) || at < 0 || at >= batch.length || vectors[at] !== undefined) {
          return yield* fail(`the answer's item ${position} is not a vector for one of the texts`)
        }
        vectors[at] = item.embedding
      }
      return vectors
    })

  return {
    model,
    embed: (texts) =>
      Effect.gen(function* () {
        if (texts.length === 0) return []
        const batches: Array<ReadonlyArray<string>> = []
        for (let i = 0; i < texts.length; i += batchSize) batches.push(texts.slice(i, i + batchSize))
        const results = yield* Effect.forEach(batches, embedBatch, { concurrency: options.concurrency ?? 2 })
        const vectors = results.flat()
        const dims = vectors[0]!.length
        if (dims === 0 || vectors.some((v) => v.length !== dims)) {
          return yield* fail("the vectors do not all have the same, non-zero length")
        }
        return vectors
      }).pipe(Effect.withSpan("Embedder.embed", { attributes: { model, texts: texts.length } }))
  }
}

export const layerOpenAI = (options: OpenAIEmbedderOptions): Layer.Layer<Embedder> =>
  Layer.sync(Embedder, () => makeOpenAI(options))

/**
 * From configuration: `CTXO_EMBEDDING_MODEL` (required), `CTXO_EMBEDDING_BASE_URL` and
 * `CTXO_EMBEDDING_API_KEY` (each falling back to `CTXO_UPSTREAM_BASE_URL` / `CTXO_UPSTREAM_API_KEY`),
 * `CTXO_EMBEDDING_BATCH_SIZE` and `CTXO_EMBEDDING_DIMENSIONS` (optional).
 */
export const layerOpenAIConfig: Layer.Layer<Embedder, import("effect/ConfigError").ConfigError> =
  Layer.effect(
    Embedder,
    Effect.gen(function* () {
      const model = yield* Config.string("CTXO_EMBEDDING_MODEL")
      const baseURL = yield* Config.option(
        Config.string("CTXO_EMBEDDING_BASE_URL").pipe(
          Config.orElse(() => Config.string("CTXO_UPSTREAM_BASE_URL"))
        )
      )
      const apiKey = yield* Config.redacted("CTXO_EMBEDDING_API_KEY").pipe(
        Config.orElse(() => Config.redacted("CTXO_UPSTREAM_API_KEY"))
      )
      const batchSize = yield* Config.option(Config.integer("CTXO_EMBEDDING_BATCH_SIZE"))
      const dimensions = yield* Config.option(Config.integer("CTXO_EMBEDDING_DIMENSIONS"))
      return makeOpenAI({
        model,
        apiKey,
        ...Option.match(baseURL, { onNone: () => ({}), onSome: (url) => ({ baseURL: url }) }),
        ...Option.match(batchSize, { onNone: () => ({}), onSome: (n) => ({ batchSize: n }) }),
        ...Option.match(dimensions, { onNone: () => ({}), onSome: (n) => ({ dimensions: n }) })
      })
    })
  )

/** FNV-1a, 32 bits. */
const fnv1a = (text: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193)
  }
  return hash >>> 0
}

/**
 * The local stand-in's vector of a text: each analyzer term (weight 1) and each character trigram of
 * a Latin term (`#deploy#` -> `#de`, `dep`, ..., weight 0.5) or single Han character (weight 0.5) is
 * hashed to a dimension with a hashed sign; the sum is scaled to length 1 (all zeros for a text
 * without terms). Deterministic; similar spellings get similar vectors, synonyms do not.
 */
export const hashedVector = (text: string, dimensions = 256): Array<number> => {
  const vector = new Array<number>(dimensions).fill(0)
  const add = (feature: string, weight: number) => {
    const h = fnv1a(feature)
    vector[h % dimensions]! += h & 0x80000000 ? -weight : weight
  }
  for (const term of analyze(text)) {
    add(`w:${term}`, 1)
    if (/^[a-z]/.test(term) && term.length > 3) {
      const marked = `#${term}#`
      for (let i = 0; i + 3 <= marked.length; i++) add(`t:${marked.slice(i, i + 3)}`, 0.5)
    } else if (/^\p{Script=Han}{2,}$/u.test(term)) {
      for (const char of term) add(`c:${char}`, 0.5)
    }
  }
  const norm = Math.sqrt(vector.reduce((sum, x) => sum + x * x, 0))
  return norm === 0 ? vector : vector.map((x) => x / norm)
}

export const makeHashed = (options: { readonly dimensions?: number } = {}): Service => {
  const dimensions = options.dimensions ?? 256
  return {
    model: `ctxo-hashed-ngrams-${dimensions}`,
    embed: (texts) => Effect.sync(() => texts.map((text) => hashedVector(text, dimensions)))
  }
}

/** The local stand-in (see `hashedVector`): for tests, benchmarks and offline runs. */
export const layerHashed = (options: { readonly dimensions?: number } = {}): Layer.Layer<Embedder> =>
  Layer.sync(Embedder, () => makeHashed(options))
