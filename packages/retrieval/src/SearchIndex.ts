/**
 * A full-text index ranked by BM25 (minisearch's BM25+, k1 1.2, b 0.7, d 0.5), with the terms of
 * `Analyzer.analyze`. Pure: no file system, no clock, no timers.
 *
 * Removing or replacing a document only marks it in minisearch (its postings stay until a vacuum),
 * and a search over such leftovers scores with wrong document frequencies (even negative scores).
 * minisearch's own vacuum runs on timers; here the postings of removed documents are dropped
 * synchronously before the next search or snapshot, in one pass however many edits came before.
 *
 * Two fields are indexed: `title` (weighted by `titleBoost`) and `text`. `meta` is stored, not
 * indexed, and is what `filter` sees. The default boost is 1: a Markdown block's text starts with its
 * own heading line, so its heading already counts in both fields, and the title adds the parents'
 * headings (on the labelled knowledge set a boost of 1 ranked better than 1.5, 2 or 3; the benchmark
 * prints the comparison). Results are best first with ties broken by id, so the same
 * index and query always give the same list; a snapshot (`toJSON`) loads back (`fromJSON`) to an
 * index that gives the same results.
 */
import { Either, Schema } from "effect"
import MiniSearch from "minisearch"
import type { AnalyzerOptions } from "./Analyzer.ts"
import { ANALYZER_VERSION, analyze, defaultAnalyzerOptions } from "./Analyzer.ts"
import { describeSchemaError, parseSnapshotText } from "./internal/snapshot.ts"
import { IndexFormatError } from "./RetrievalErrors.ts"

export type Meta = Readonly<Record<string, string | number>>

export interface Document {
  readonly id: string
  readonly text: string
  readonly title?: string
  readonly meta?: Meta
}

export interface Hit {
  readonly id: string
  readonly score: number
}

export interface SearchOptions {
  /** At most this many hits (default 10). */
  readonly limit?: number
  /** Keep only documents this accepts; applied before `limit`. */
  readonly filter?: (document: { readonly id: string; readonly meta: Meta }) => boolean
}

export interface IndexOptions {
  readonly analyzer?: AnalyzerOptions
  /** Weight of a match in the title against one in the text (default 1). */
  readonly titleBoost?: number
}

export const SNAPSHOT_FORMAT = "ctxo.retrieval/search-index"
export const SNAPSHOT_VERSION = 1
export const DEFAULT_LIMIT = 10
export const DEFAULT_TITLE_BOOST = 1

interface Stored {
  readonly id: string
  // Always a string ("" when the document has none): every document then has a length for both
  // fields, and the average title length is the same before and after a snapshot round trip.
  readonly title: string
  readonly text: string
  readonly meta?: Meta
}

const minisearchOptions = (analyzer: Required<AnalyzerOptions>, titleBoost: number) => ({
  fields: ["title", "text"],
  storeFields: ["meta"],
  tokenize: (text: string) => analyze(text, analyzer),
  processTerm: (term: string) => term,
  autoVacuum: false as const,
  searchOptions: { boost: { title: titleBoost } }
})

const IndexData = Schema.Struct({
  documentCount: Schema.Number,
  nextId: Schema.Number,
  documentIds: Schema.Record({ key: Schema.String, value: Schema.String }),
  fieldIds: Schema.Struct({ title: Schema.Literal(0), text: Schema.Literal(1) }),
  fieldLength: Schema.Record({ key: Schema.String, value: Schema.Array(Schema.Number) }),
  averageFieldLength: Schema.Array(Schema.Number),
  storedFields: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  dirtCount: Schema.optional(Schema.Number),
  // Postings are many; their shape is checked by minisearch as it loads them.
  index: Schema.Array(Schema.Tuple(Schema.String, Schema.Unknown)),
  serializationVersion: Schema.Literal(2)
})

const SnapshotSchema = Schema.Struct({
  format: Schema.Literal(SNAPSHOT_FORMAT),
  version: Schema.Literal(SNAPSHOT_VERSION),
  analyzer: Schema.Struct({
    version: Schema.Literal(ANALYZER_VERSION),
    stem: Schema.Boolean,
    cjkBigrams: Schema.Boolean
  }),
  titleBoost: Schema.Number,
  index: IndexData
})

/** What `toJSON` returns: plain data, `JSON.stringify` gives the text `fromJSON` reads. */
export type Snapshot = typeof SnapshotSchema.Type

const decodeSnapshot = Schema.decodeUnknownEither(SnapshotSchema)

export class SearchIndex {
  private constructor(
    private engine: MiniSearch<Stored>,
    readonly analyzer: Required<AnalyzerOptions>,
    readonly titleBoost: number
  ) {}

  /** An empty index. */
  static make(options: IndexOptions = {}): SearchIndex {
    const analyzer = { ...defaultAnalyzerOptions, ...options.analyzer }
    const titleBoost = options.titleBoost ?? DEFAULT_TITLE_BOOST
    return new SearchIndex(
      new MiniSearch<Stored>(minisearchOptions(analyzer, titleBoost)),
      analyzer,
      titleBoost
    )
  }

  /** An index of these documents (a later document with an id already given replaces it). */
  static fromDocuments(documents: Iterable<Document>, options: IndexOptions = {}): SearchIndex {
    const index = SearchIndex.make(options)
    for (const document of documents) index.upsert(document)
    return index
  }

  /**
   * Loads a snapshot: the text `JSON.stringify(index)` wrote, or the parsed value. Fails, with the
   * reason in one sentence, on text that is not JSON, another format, another snapshot or analyzer
   * version (terms would differ: rebuild the index), or a field of the wrong shape.
   */
  static fromJSON(input: unknown): Either.Either<SearchIndex, IndexFormatError> {
    const fail = (reason: string) => Either.left(new IndexFormatError({ snapshot: "search index", reason }))
    const parsed = typeof input === "string" ? parseSnapshotText(input) : Either.right(input)
    if (Either.isLeft(parsed)) return fail(parsed.left)
    const value = parsed.right
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      return fail("expected a JSON object")
    }
    const header = value as { format?: unknown; version?: unknown; analyzer?: { version?: unknown } }
    if (header.format !== SNAPSHOT_FORMAT) {
      return fail(`format is ${JSON.stringify(header.format) ?? "missing"}, expected "${SNAPSHOT_FORMAT}"`)
    }
    if (header.version !== SNAPSHOT_VERSION) {
      return fail(
        `version ${JSON.stringify(header.version) ?? "(missing)"} is not supported (this build reads version ${SNAPSHOT_VERSION})`
      )
    }
    const analyzerVersion = header.analyzer?.version
    if (typeof analyzerVersion === "number" && analyzerVersion !== ANALYZER_VERSION) {
      return fail(
        `it was built with analyzer version ${analyzerVersion}, this build has version ${ANALYZER_VERSION}: rebuild the index`
      )
    }
    const decoded = decodeSnapshot(value)
    if (Either.isLeft(decoded)) return fail(describeSchemaError(decoded.left))
    const snapshot = decoded.right
    const analyzer: Required<AnalyzerOptions> = {
      stem: snapshot.analyzer.stem,
      cjkBigrams: snapshot.analyzer.cjkBigrams
    }
    try {
      const engine = MiniSearch.loadJS<Stored>(
        snapshot.index as unknown as Parameters<typeof MiniSearch.loadJS>[0],
        minisearchOptions(analyzer, snapshot.titleBoost)
      )
      return Either.right(new SearchIndex(engine, analyzer, snapshot.titleBoost))
    } catch (error) {
      return fail(`index: ${error instanceof Error ? error.message : String(error)}`)
    }
  }

  /** How many documents the index holds. */
  get size(): number {
    return this.engine.documentCount
  }

  has(id: string): boolean {
    return this.engine.has(id)
  }

  /** The stored meta of a document (undefined when the index does not hold it). */
  meta(id: string): Meta | undefined {
    if (!this.engine.has(id)) return undefined
    return (this.engine.getStoredFields(id)?.meta as Meta | undefined) ?? {}
  }

  /** Adds a document, or replaces the one with its id. */
  upsert(document: Document): "added" | "replaced" {
    const replaced = this.engine.has(document.id)
    if (replaced) this.discard(document.id)
    this.engine.add({
      id: document.id,
      text: document.text,
      title: document.title ?? "",
      ...(document.meta === undefined ? {} : { meta: document.meta })
    })
    return replaced ? "replaced" : "added"
  }

  /** Removes a document; false when the index does not hold it. */
  remove(id: string): boolean {
    if (!this.engine.has(id)) return false
    this.discard(id)
    return true
  }

  /** Hits best first, ties by id; an empty list when no term of the query is in the index. */
  search(query: string, options: SearchOptions = {}): Array<Hit> {
    const limit = options.limit ?? DEFAULT_LIMIT
    if (limit <= 0) return []
    this.vacuum()
    const filter = options.filter
    const results = this.engine.search(
      query,
      filter === undefined
        ? {}
        : {
            filter: (result) =>
              filter({ id: result.id as string, meta: (result.meta as Meta | undefined) ?? {} })
          }
    )
    return results
      .map((r) => ({ id: r.id as string, score: r.score }))
      .sort(compareHits)
      .slice(0, limit)
  }

  /** The index as plain data (removed documents cleaned out), for `JSON.stringify` and `fromJSON`. */
  toJSON(): Snapshot {
    this.vacuum()
    return {
      format: SNAPSHOT_FORMAT,
      version: SNAPSHOT_VERSION,
      analyzer: { version: ANALYZER_VERSION, ...this.analyzer },
      titleBoost: this.titleBoost,
      index: this.engine.toJSON() as unknown as Snapshot["index"]
    }
  }

  private discard(id: string) {
    this.engine.discard(id)
  }

  /**
   * Drops the postings of removed documents, when there are any: the loop of minisearch 7.2's own
   * (timer-driven) vacuum, run synchronously over its index. The version is pinned exactly; the
   * property test "edits leave no trace" checks the result against an index built afresh.
   */
  private vacuum() {
    const engine = this.engine as unknown as Internals
    if (engine._dirtCount === 0) return
    for (const [term, fields] of engine._index) {
      for (const [fieldId, postings] of fields) {
        for (const shortId of postings.keys()) {
          if (!engine._documentIds.has(shortId)) postings.delete(shortId)
        }
        if (postings.size === 0) fields.delete(fieldId)
      }
      if (fields.size === 0) engine._index.delete(term)
    }
    engine._dirtCount = 0
  }
}

/** The parts of minisearch 7.2's state the synchronous vacuum touches. */
interface Internals {
  _dirtCount: number
  readonly _documentIds: ReadonlyMap<number, unknown>
  readonly _index: {
    [Symbol.iterator](): Iterator<[string, Map<number, Map<number, number>>]>
    delete(term: string): void
  }
}

/** Best first; equal scores by id, so the order never depends on insertion. */
export const compareHits = (a: Hit, b: Hit): number =>
  b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
