/**
 * The knowledge index of each data root (issue 17, seed 003 "Knowledge: 按相关性"): the compiler's
 * `KnowledgeIndex` over `@ctxo/retrieval/FileIndex`, saved through the store
 * (`knowledge-index.json`), so a restart over unchanged files indexes nothing.
 *
 * - One index per data root (a gateway's tenant), keyed by the store's scope; its documents are the
 *   knowledge units of every session's knowledge files, by `<session>/<path>#<block>`.
 * - Each compile that ranks knowledge brings its session's files with a content hash: only new and
 *   changed files are indexed again; a session's file that is no longer among its knowledge leaves
 *   the index; the other sessions' files stay as they are (also those indexed before a restart).
 * - BM25, or hybrid (BM25 fused with cosine by reciprocal rank) when an embedder is configured
 *   (`CTXO_EMBEDDING_MODEL` with a key: `@ctxo/retrieval/Embedder.layerOpenAIConfig`).
 * - One index is used by one fiber at a time. A failure to rank (the index cannot be saved, the
 *   embedder is down) is logged, and the compile ranks with its own ranker instead.
 */
import { createHash } from "node:crypto"
import { KnowledgeIndex } from "@ctxo/compiler/ContextSource"
import type { Service as EmbedderService } from "@ctxo/retrieval/Embedder"
import * as FileIndex from "@ctxo/retrieval/FileIndex"
import { Store } from "@ctxo/store/Store"
import { Effect, Layer } from "effect"

/** The block id of a unit that is a whole file (not Markdown): `<path>#*`. */
const WHOLE_FILE = "*"

const hashOf = (text: string) => createHash("sha256").update(text).digest("hex").slice(0, 16)

/** What one data root's index did last (for tests and logs). */
export interface IndexStats {
  readonly lastSync?: FileIndex.SyncReport
  readonly ranking?: "bm25" | "hybrid"
}

export const make = (options: { readonly embedder?: EmbedderService } = {}) =>
  Effect.gen(function* () {
    const store = yield* Store
    const roots = new Map<
      string,
      {
        readonly index: FileIndex.FileIndex<unknown>
        /** The files of each session, as last synced. */
        readonly bySession: Map<string, ReadonlyArray<FileIndex.FileVersion>>
        readonly lock: Effect.Semaphore
        stats: IndexStats
      }
    >()
    const hashes = new Map<string, { readonly text: string; readonly version: string }>()
    const versionOf = (key: string, text: string) => {
      const hit = hashes.get(key)
      if (hit !== undefined && hit.text === text) return hit.version
      const version = hashOf(text)
      hashes.set(key, { text, version })
      if (hashes.size > 8192) hashes.delete(hashes.keys().next().value!)
      return version
    }

    const rootOf = (scope: string) =>
      Effect.gen(function* () {
        const known = roots.get(scope)
        if (known !== undefined) return known
        const index = yield* FileIndex.make<unknown>({
          persistence: { load: store.readKnowledgeIndex, save: store.writeKnowledgeIndex },
          ...(options.embedder === undefined ? {} : { embedder: options.embedder })
        })
        // The files indexed before (a restart): kept for their sessions until those sessions rank again.
        const bySession = new Map<string, Array<FileIndex.FileVersion>>()
        for (const f of yield* index.files) {
          const session = f.path.slice(0, f.path.indexOf("/"))
          bySession.set(session, [...(bySession.get(session) ?? []), f])
        }
        const entry = { index, bySession, lock: yield* Effect.makeSemaphore(1), stats: {} as IndexStats }
        roots.set(scope, entry)
        return entry
      })

    const rank: KnowledgeIndex["Type"]["rank"] = (request) =>
      Effect.gen(function* () {
        const scope = yield* store.scope
        const root = yield* rootOf(scope)
        const prefix = `${request.sessionId}/`
        const files = request.files.map((f) => ({
          path: `${prefix}${f.path}`,
          version: versionOf(`${scope}\u0000${prefix}${f.path}`, f.content)
        }))
        const unitsOf = new Map(request.files.map((f) => [`${prefix}${f.path}`, f]))
        return yield* root.lock.withPermits(1)(
          Effect.gen(function* () {
            root.bySession.set(request.sessionId, files)
            const all = [...root.bySession.values()].flat()
            const report = yield* root.index.sync(all, (path) =>
              Effect.succeed(
                (unitsOf.get(path)?.units ?? []).map((u) => {
                  const file = path.slice(prefix.length)
                  const block = u.id.startsWith(`${file}#`) ? u.id.slice(file.length + 1) : WHOLE_FILE
                  return { id: block, text: u.text }
                })
              )
            )
            const found = yield* root.index.search(request.query, {
              limit: 64,
              paths: (path) => path.startsWith(prefix)
            })
            root.stats = { lastSync: report, ranking: found.ranking }
            return found.hits.map((hit) => {
              const file = hit.path.slice(prefix.length)
              return hit.block === WHOLE_FILE ? file : `${file}#${hit.block}`
            })
          })
        )
      }).pipe(
        Effect.catchAll((e) =>
          Effect.as(
            Effect.logWarning(
              `knowledge index of session ${request.sessionId}: ${String((e as Error)?.message ?? e)}; ranked without it`
            ),
            [] as ReadonlyArray<string>
          )
        )
      )

    /** The stats of the index of the store's current data root. */
    const stats = Effect.map(store.scope, (scope) => roots.get(scope)?.stats ?? {})
    return { rank, stats }
  })

/** The compiler's `KnowledgeIndex` over the store in context (and an embedder, when given). */
export const layer = (options: { readonly embedder?: EmbedderService } = {}) =>
  Layer.effect(
    KnowledgeIndex,
    Effect.map(make(options), (service) => ({ rank: service.rank }))
  )
