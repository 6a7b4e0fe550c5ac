/**
 * Ranking helpers for hybrid retrieval, pure: cosine similarity, a brute-force vector ranking, and
 * reciprocal-rank fusion (RRF) of several rankings. Every ranking is best first with ties by id.
 */
import type { Hit } from "./SearchIndex.ts"
import { compareHits } from "./SearchIndex.ts"

/** Cosine similarity; 0 when either vector is all zeros or the lengths differ. */
export const cosine = (a: ArrayLike<number>, b: ArrayLike<number>): number => {
  if (a.length !== b.length) return 0
  let dot = 0
  let na = 0
  let nb = 0
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!
    const y = b[i]!
    dot += x * y
    na += x * x
    nb += y * y
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb)
}

/** The `limit` entries most similar to `query` (cosine above 0), best first, ties by id. */
export const rankByVector = (
  query: ArrayLike<number>,
  entries: Iterable<readonly [id: string, vector: ArrayLike<number>]>,
  limit: number
): Array<Hit> => {
  const hits: Array<Hit> = []
  for (const [id, vector] of entries) {
    const score = cosine(query, vector)
    if (score > 0) hits.push({ id, score })
  }
  return hits.sort(compareHits).slice(0, Math.max(0, limit))
}

/** The constant of RRF: a hit at rank r (1-based) adds 1 / (k + r). 60 is the usual choice. */
export const DEFAULT_RRF_K = 60

/**
 * Reciprocal-rank fusion: each id scores the sum over the rankings of 1 / (k + its rank there);
 * the fused list is best first, ties by id, at most `limit` long.
 */
export const reciprocalRankFusion = (options: {
  readonly rankings: ReadonlyArray<ReadonlyArray<Hit>>
  readonly limit: number
  readonly k?: number
}): Array<Hit> => {
  const k = options.k ?? DEFAULT_RRF_K
  const scores = new Map<string, number>()
  for (const ranking of options.rankings) {
    ranking.forEach((hit, i) => {
      scores.set(hit.id, (scores.get(hit.id) ?? 0) + 1 / (k + i + 1))
    })
  }
  return [...scores]
    .map(([id, score]) => ({ id, score }))
    .sort(compareHits)
    .slice(0, Math.max(0, options.limit))
}
