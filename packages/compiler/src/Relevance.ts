/**
 * Relevance for the sources that load on demand (tools, skills, knowledge, recalled turns): BM25
 * over `@ctxo/retrieval`'s analyzer (words of any script, Chinese segmented with
 * `Intl.Segmenter`), on the query's distinct words (at most `QUERY_CHARS`). A ranker keeps the
 * indexes of its last `capacity` sets of documents, answered again only while every id and text
 * is the same, so a warm compile of an unchanged session ranks without indexing again, and a
 * session's next turn indexes only its new turn.
 */
import { SearchIndex } from "@ctxo/retrieval/SearchIndex"
import type { Ranker } from "./ToolSelection.ts"

/** The most of a query relevance reads (distinct words, in order): a huge input ranks in bounded time. */
export const QUERY_CHARS = 4096

const queryOf = (query: string) => {
  const words = [...new Set(query.split(/\s+/).filter((w) => w !== ""))].join(" ")
  return words.length <= QUERY_CHARS ? words : words.slice(0, QUERY_CHARS)
}

type Docs = ReadonlyArray<{ readonly id: string; readonly text: string }>

const sameDocs = (a: Docs, b: Docs) =>
  a === b || (a.length === b.length && a.every((d, i) => d.id === b[i]!.id && d.text === b[i]!.text))

/** `docs` begins with every document of `prefix`, in its order, with the same texts. */
const startsWith = (docs: Docs, prefix: Docs) =>
  prefix.length < docs.length && prefix.every((d, i) => d.id === docs[i]!.id && d.text === docs[i]!.text)

/**
 * A ranker with its own bounded cache of indexes (the oldest set out first). A set that extends
 * a cached one (a session's next turn adds its finished turn to the last set) is made from that
 * index by adding only the new documents: the same documents added in the same order as a fresh
 * index would, so its scores are the same to the bit. Any other set is indexed afresh.
 */
export const makeRanker = (capacity = 32): Ranker => {
  const indexes = new Map<string, { readonly docs: Docs; readonly index: SearchIndex }>()
  const keyOf = (docs: Docs) => docs.map((d) => `${d.id}\u0000${d.text.length}`).join("\u0001")
  const indexOf = (docs: Docs) => {
    const key = keyOf(docs)
    const hit = indexes.get(key)
    if (hit !== undefined && sameDocs(hit.docs, docs)) return hit.index
    let index: SearchIndex | undefined
    for (const [oldKey, entry] of [...indexes].reverse()) {
      if (!startsWith(docs, entry.docs)) continue
      for (const d of docs.slice(entry.docs.length)) entry.index.upsert({ id: d.id, text: d.text })
      indexes.delete(oldKey)
      index = entry.index
      break
    }
    index ??= SearchIndex.fromDocuments(docs.map((d) => ({ id: d.id, text: d.text })))
    indexes.delete(key)
    indexes.set(key, { docs, index })
    if (indexes.size > capacity) indexes.delete(indexes.keys().next().value!)
    return index
  }
  return (query, docs) =>
    docs.length === 0 || query.trim() === ""
      ? []
      : indexOf(docs)
          .search(queryOf(query), { limit: docs.length })
          .filter((hit) => hit.score > 0)
}

/** A ranker with no cache kept between calls (a compile without a `CompileCache`). */
export const rank: Ranker = (query, docs) => makeRanker(1)(query, docs)
