/**
 * A knowledge index kept in step with a set of files (one per data root).
 *
 * The caller lists the files with a version each (a content hash it computes) and says how to get a
 * file's blocks. `sync` asks for the blocks of new and changed files only, drops the blocks of files
 * that are gone, leaves the rest alone, and says what it did. The index is saved through the
 * caller's `Persistence` (never the file system directly) after any change, so a restart over
 * unchanged files asks for no blocks at all.
 *
 * Every block is one document, id `<path>#<block id>`, title the block's title, meta `{ path }`.
 *
 * With an `embedder`, each block also gets a vector, cached by (document id, hash of the embedded
 * text) and saved with the index: an unchanged block is never embedded twice, also across restarts,
 * and vectors of another `model` are dropped. Search then fuses the BM25 ranking and the cosine
 * ranking by reciprocal rank; without an embedder it is BM25 alone. An embedding failure never loses
 * the full-text update: `sync` reports it and embeds the missing blocks next time; `search` falls
 * back to BM25 and says so in `note`.
 *
 * A saved index that cannot be loaded (corrupt, another format or analyzer version) is not an
 * error: the index starts empty, the next `sync` rebuilds it and reports why (`reset`).
 */
import { contentHash } from "@ctxo/blocks/BlockIds"
import { Effect, Either, Schema } from "effect"
import type * as Embedder from "./Embedder.ts"
import { DEFAULT_RRF_K, rankByVector, reciprocalRankFusion } from "./Hybrid.ts"
import { decodeVector, describeSchemaError, encodeVector, parseSnapshotText } from "./internal/snapshot.ts"
import type { EmbeddingError } from "./RetrievalErrors.ts"
import { IndexFormatError, InvalidBlocks } from "./RetrievalErrors.ts"
import type { IndexOptions } from "./SearchIndex.ts"
import { DEFAULT_LIMIT, SearchIndex } from "./SearchIndex.ts"

export interface FileVersion {
  /** The file's path as the caller names it (relative to the data root, say). */
  readonly path: string
  /** Any string that changes when the content changes (a content hash). */
  readonly version: string
}

export interface FileBlock {
  /** Unique within the file, e.g. a heading path `Deploy/Rollback`. */
  readonly id: string
  readonly text: string
  readonly title?: string
}

/** Where the index is kept between runs: text in, text out. */
export interface Persistence<E = never> {
  readonly load: Effect.Effect<string | undefined, E>
  readonly save: (text: string) => Effect.Effect<void, E>
}

export interface SyncReport {
  /** Files counted by what happened to them. */
  readonly added: number
  readonly updated: number
  readonly removed: number
  readonly unchanged: number
  /** Blocks in the index after the sync. */
  readonly blocks: number
  /** Why the saved index was discarded and rebuilt, when it was. */
  readonly reset?: string
  /** With an embedder: blocks embedded now, and the error that left some without a vector. */
  readonly embedding?: { readonly embedded: number; readonly error?: string }
}

export interface FileHit {
  /** `<path>#<block id>` */
  readonly id: string
  readonly path: string
  readonly block: string
  readonly score: number
}

export interface FileSearchOptions {
  /** At most this many hits (default 10). */
  readonly limit?: number
  /** Keep only blocks of the files this accepts. */
  readonly paths?: (path: string) => boolean
}

export interface FileSearchResult {
  readonly hits: ReadonlyArray<FileHit>
  /** `hybrid`: BM25 and cosine fused; `bm25`: full text alone. */
  readonly ranking: "bm25" | "hybrid"
  /** Why the ranking is not the configured one (the embedder failed, no vectors yet). */
  readonly note?: string
}

export interface FileIndex<E = never> {
  readonly sync: <E2 = never>(
    files: ReadonlyArray<FileVersion>,
    blocksOf: (path: string) => Effect.Effect<ReadonlyArray<FileBlock>, E2>
  ) => Effect.Effect<SyncReport, E | E2 | InvalidBlocks>
  readonly search: (query: string, options?: FileSearchOptions) => Effect.Effect<FileSearchResult>
  /** The files indexed, with their versions, sorted by path. */
  readonly files: Effect.Effect<ReadonlyArray<FileVersion>>
}

export interface Options<E = never> {
  readonly persistence: Persistence<E>
  readonly embedder?: Embedder.Service
  readonly index?: IndexOptions
  /** Files whose blocks are fetched at once (default 4). */
  readonly concurrency?: number
  /** Hybrid: candidates taken from each ranking before fusion (default 50). */
  readonly candidates?: number
  /** Hybrid: the RRF constant (default 60). */
  readonly rrfK?: number
}

export const SNAPSHOT_FORMAT = "ctxo.retrieval/file-index"
export const SNAPSHOT_VERSION = 1

const FileEntrySchema = Schema.Struct({
  version: Schema.String,
  /** block id -> hash of its title and text */
  blocks: Schema.Record({ key: Schema.String, value: Schema.String })
})

const SnapshotSchema = Schema.Struct({
  format: Schema.Literal(SNAPSHOT_FORMAT),
  version: Schema.Literal(SNAPSHOT_VERSION),
  files: Schema.Record({ key: Schema.String, value: FileEntrySchema }),
  index: Schema.Unknown,
  vectors: Schema.optional(
    Schema.Struct({
      model: Schema.String,
      entries: Schema.Record({
        key: Schema.String,
        value: Schema.Struct({ hash: Schema.String, vector: Schema.String })
      })
    })
  )
})

interface FileState {
  readonly version: string
  readonly blocks: ReadonlyMap<string, string>
}

interface VectorEntry {
  readonly hash: string
  readonly vector: Float32Array
}

interface State {
  index: SearchIndex
  files: Map<string, FileState>
  vectorModel: string | undefined
  vectors: Map<string, VectorEntry>
  reset: string | undefined
}

export const documentId = (path: string, block: string): string => `${path}#${block}`

/** What is embedded for a block, and what its hash covers. */
const embeddedText = (block: FileBlock): string =>
  block.title === undefined ? block.text : `${block.title}\n${block.text}`

/** Loads a saved file index (text from `Persistence.load`); pure. */
export const decodeSnapshot = (
  text: string,
  options: IndexOptions = {}
): Either.Either<Omit<State, "reset">, IndexFormatError> => {
  const fail = (reason: string) => Either.left(new IndexFormatError({ snapshot: "file index", reason }))
  const parsed = parseSnapshotText(text)
  if (Either.isLeft(parsed)) return fail(parsed.left)
  const header = parsed.right as { format?: unknown; version?: unknown } | null
  if (typeof header !== "object" || header === null || header.format !== SNAPSHOT_FORMAT) {
    return fail(`format is ${JSON.stringify(header?.format) ?? "missing"}, expected "${SNAPSHOT_FORMAT}"`)
  }
  if (header.version !== SNAPSHOT_VERSION) {
    return fail(
      `version ${JSON.stringify(header.version) ?? "(missing)"} is not supported (this build reads version ${SNAPSHOT_VERSION})`
    )
  }
  const decoded = Schema.decodeUnknownEither(SnapshotSchema)(parsed.right)
  if (Either.isLeft(decoded)) return fail(describeSchemaError(decoded.left))
  const snapshot = decoded.right
  const index = SearchIndex.fromJSON(snapshot.index)
  if (Either.isLeft(index))
    return Either.left(new IndexFormatError({ snapshot: "file index", reason: index.left.reason }))
  const loaded = index.right
  if (loaded.titleBoost !== (options.titleBoost ?? loaded.titleBoost)) {
    return fail(
      `it was built with title boost ${loaded.titleBoost}, ${options.titleBoost} is configured: rebuild the index`
    )
  }
  const files = new Map<string, FileState>()
  let blocks = 0
  for (const [path, entry] of Object.entries(snapshot.files)) {
    files.set(path, { version: entry.version, blocks: new Map(Object.entries(entry.blocks)) })
    for (const block of Object.keys(entry.blocks)) {
      blocks++
      if (!loaded.has(documentId(path, block)))
        return fail(`files.${path}: block "${block}" is not in the index`)
    }
  }
  if (blocks !== loaded.size) return fail(`the index holds ${loaded.size} blocks, the file list ${blocks}`)
  const vectors = new Map<string, VectorEntry>()
  for (const [id, entry] of Object.entries(snapshot.vectors?.entries ?? {})) {
    const vector = decodeVector(entry.vector)
    if (vector === undefined)
      return fail(`vectors.entries["${id.slice(0, 60)}"]: not a base64 float32 vector`)
    vectors.set(id, { hash: entry.hash, vector })
  }
  return Either.right({ index: loaded, files, vectorModel: snapshot.vectors?.model, vectors })
}

const encodeSnapshot = (state: State): string => {
  const files: Record<string, { version: string; blocks: Record<string, string> }> = {}
  for (const path of [...state.files.keys()].sort()) {
    const file = state.files.get(path)!
    files[path] = { version: file.version, blocks: Object.fromEntries(file.blocks) }
  }
  const entries: Record<string, { hash: string; vector: string }> = {}
  for (const id of [...state.vectors.keys()].sort()) {
    const entry = state.vectors.get(id)!
    entries[id] = { hash: entry.hash, vector: encodeVector(Array.from(entry.vector)) }
  }
  return JSON.stringify({
    format: SNAPSHOT_FORMAT,
    version: SNAPSHOT_VERSION,
    files,
    index: state.index.toJSON(),
    ...(state.vectorModel === undefined ? {} : { vectors: { model: state.vectorModel, entries } })
  })
}

/** Loads the saved index (or starts empty) and gives the index's operations. */
export const make = <E = never>(options: Options<E>): Effect.Effect<FileIndex<E>, E> =>
  Effect.gen(function* () {
    const text = yield* options.persistence.load
    const empty = (reset: string | undefined): State => ({
      index: SearchIndex.make(options.index),
      files: new Map(),
      vectorModel: undefined,
      vectors: new Map(),
      reset
    })
    let state: State = empty(undefined)
    if (text !== undefined) {
      const decoded = decodeSnapshot(text, options.index)
      state = Either.isLeft(decoded) ? empty(decoded.left.message) : { ...decoded.right, reset: undefined }
    }
    const embedder = options.embedder
    if (embedder !== undefined && state.vectorModel !== embedder.model) {
      // Vectors of another model live in another space: never compared, dropped.
      state.vectorModel = embedder.model
      state.vectors.clear()
    }
    const lock = yield* Effect.makeSemaphore(1)
    const concurrency = options.concurrency ?? 4
    const candidates = options.candidates ?? 50

    const sync = <E2>(
      files: ReadonlyArray<FileVersion>,
      blocksOf: (path: string) => Effect.Effect<ReadonlyArray<FileBlock>, E2>
    ): Effect.Effect<SyncReport, E | E2 | InvalidBlocks> =>
      Effect.gen(function* () {
        const listed = new Map<string, string>()
        for (const file of files) {
          if (listed.has(file.path))
            return yield* new InvalidBlocks({ path: file.path, reason: "the file is listed twice" })
          listed.set(file.path, file.version)
        }
        const changed = [...listed].filter(([path, version]) => state.files.get(path)?.version !== version)
        const vanished = [...state.files.keys()].filter((path) => !listed.has(path))
        // Unchanged files whose blocks lack a vector (an earlier embedding failed): fetched to embed.
        const unembedded =
          embedder === undefined
            ? []
            : [...listed.keys()].filter((path) => {
                const file = state.files.get(path)
                if (file === undefined || file.version !== listed.get(path)) return false
                for (const [block, hash] of file.blocks) {
                  if (state.vectors.get(documentId(path, block))?.hash !== hash) return true
                }
                return false
              })

        const fetched = yield* Effect.forEach(
          [...changed.map(([path]) => path), ...unembedded],
          (path) =>
            blocksOf(path).pipe(
              Effect.flatMap((blocks) => validate(path, blocks)),
              Effect.map((blocks) => [path, blocks] as const)
            ),
          { concurrency }
        )
        const blocksByPath = new Map(fetched)

        // Apply the full-text changes in one synchronous step: a search never sees half a sync.
        let added = 0
        let updated = 0
        for (const path of vanished) {
          for (const block of state.files.get(path)!.blocks.keys()) {
            state.index.remove(documentId(path, block))
            state.vectors.delete(documentId(path, block))
          }
          state.files.delete(path)
        }
        for (const [path, version] of changed) {
          const before = state.files.get(path)
          if (before === undefined) added++
          else updated++
          const blocks = blocksByPath.get(path)!
          const hashes = new Map(blocks.map((b) => [b.id, contentHash(embeddedText(b))]))
          for (const block of before?.blocks.keys() ?? []) {
            if (!hashes.has(block)) {
              state.index.remove(documentId(path, block))
              state.vectors.delete(documentId(path, block))
            }
          }
          for (const block of blocks) {
            if (before?.blocks.get(block.id) === hashes.get(block.id)) continue
            state.index.upsert({
              id: documentId(path, block.id),
              text: block.text,
              ...(block.title === undefined ? {} : { title: block.title }),
              meta: { path }
            })
          }
          state.files.set(path, { version, blocks: hashes })
        }

        let embedding: SyncReport["embedding"]
        if (embedder !== undefined) {
          const missing: Array<{ id: string; hash: string; text: string }> = []
          for (const [path, blocks] of blocksByPath) {
            for (const block of blocks) {
              const id = documentId(path, block.id)
              const hash = contentHash(embeddedText(block))
              if (state.vectors.get(id)?.hash !== hash) missing.push({ id, hash, text: embeddedText(block) })
            }
          }
          const result = yield* Effect.either(embedder.embed(missing.map((m) => m.text)))
          if (Either.isRight(result)) {
            missing.forEach((m, i) => {
              state.vectors.set(m.id, { hash: m.hash, vector: Float32Array.from(result.right[i]!) })
            })
            embedding = { embedded: missing.length }
          } else {
            embedding = { embedded: 0, error: result.left.message }
          }
        }

        const reset = state.reset
        const dirty =
          reset !== undefined || vanished.length > 0 || changed.length > 0 || (embedding?.embedded ?? 0) > 0
        if (dirty) yield* options.persistence.save(encodeSnapshot(state))
        state.reset = undefined
        return {
          added,
          updated,
          removed: vanished.length,
          unchanged: listed.size - changed.length,
          blocks: state.index.size,
          ...(reset === undefined ? {} : { reset }),
          ...(embedding === undefined ? {} : { embedding })
        } satisfies SyncReport
      }).pipe(lock.withPermits(1), Effect.withSpan("FileIndex.sync"))

    const search = (query: string, searchOptions: FileSearchOptions = {}): Effect.Effect<FileSearchResult> =>
      Effect.gen(function* () {
        const limit = searchOptions.limit ?? DEFAULT_LIMIT
        const paths = searchOptions.paths
        const index = state.index
        const pathOf = (id: string) => {
          const path = index.meta(id)?.path
          return typeof path === "string" ? path : ""
        }
        const toHits = (hits: ReadonlyArray<{ id: string; score: number }>): Array<FileHit> =>
          hits.map(({ id, score }) => {
            const path = pathOf(id)
            return { id, path, block: id.slice(path.length + 1), score }
          })
        const filter =
          paths === undefined
            ? undefined
            : (d: { meta: Record<string, string | number> }) => paths(String(d.meta.path))
        const bm25 = index.search(query, {
          limit: embedder === undefined ? limit : Math.max(limit, candidates),
          ...(filter === undefined ? {} : { filter })
        })
        if (embedder === undefined) return { hits: toHits(bm25), ranking: "bm25" as const }
        const bm25Only = (note: string): FileSearchResult => ({
          hits: toHits(bm25.slice(0, limit)),
          ranking: "bm25",
          note
        })
        if (state.vectors.size === 0)
          return bm25Only("no block has a vector yet: sync with the embedder first")
        const embedded: Either.Either<ReadonlyArray<Embedder.Vector>, EmbeddingError> = yield* Effect.either(
          embedder.embed([query])
        )
        if (Either.isLeft(embedded)) return bm25Only(`${embedded.left.message}; ranked by full text alone`)
        const entries = function* () {
          for (const [id, entry] of state.vectors) {
            if (paths === undefined || paths(pathOf(id))) yield [id, entry.vector] as const
          }
        }
        const byVector = rankByVector(embedded.right[0]!, entries(), Math.max(limit, candidates))
        const fused = reciprocalRankFusion({
          rankings: [bm25, byVector],
          limit,
          k: options.rrfK ?? DEFAULT_RRF_K
        })
        return { hits: toHits(fused), ranking: "hybrid" as const }
      }).pipe(Effect.withSpan("FileIndex.search"))

    const listFiles = Effect.sync(() =>
      [...state.files]
        .map(([path, file]) => ({ path, version: file.version }))
        .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
    )

    return { sync, search, files: listFiles } satisfies FileIndex<E>
  })

const validate = (
  path: string,
  blocks: ReadonlyArray<FileBlock>
): Effect.Effect<ReadonlyArray<FileBlock>, InvalidBlocks> => {
  const seen = new Set<string>()
  for (const block of blocks) {
    if (seen.has(block.id))
      return Effect.fail(
        new InvalidBlocks({ path, reason: `two blocks have the id "${block.id.slice(0, 80)}"` })
      )
    seen.add(block.id)
  }
  return Effect.succeed(blocks)
}
