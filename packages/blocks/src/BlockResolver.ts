/**
 * Resolves a block reference (`基本信息/教育背景`, `^b3`) to a block and says how it matched:
 *
 * 1. `exact`: the id or short id is in the file;
 * 2. `renamed`: the sidecar knows the path as an old name of a block that was renamed or moved;
 * 3. `normalized`: equal ignoring case, Unicode width and whitespace, or a bare heading that only
 *    one block has (`教育背景` for `基本信息/教育背景`);
 * 4. `fuzzy`: the one block whose path (or, for a one-segment reference, whose heading) is clearly
 *    the most similar, above a threshold; two near-equal candidates are an error, not a guess.
 *
 * With a sidecar, blocks parsed without short ids get them first (`syncBlockIds`, nothing is
 * written), so `^b3` resolves however the file was read.
 *
 * Everything but `exact` comes with a warning to show the user. A reference that matches nothing is
 * a `BlockNotFound` that names the file and the closest ids.
 */
import { Either } from "effect"
import type { Block } from "./Block.ts"
import { flattenBlocks, getBlockById, SHORT_ID_PREFIX, splitId, unescapeSegment } from "./Block.ts"
import { BlockNotFound } from "./BlockErrors.ts"
import type { BlockIdSidecar } from "./BlockIds.ts"
import { syncBlockIds } from "./BlockIds.ts"
import { normalizeForMatch, similarity } from "./internal/similarity.ts"

export type MatchKind = "exact" | "renamed" | "normalized" | "fuzzy"

export interface Resolution {
  readonly block: Block
  readonly match: MatchKind
  /** The reference as it was written. */
  readonly ref: string
  /** Similarity in [0, 1]; 1 for exact, renamed and normalized matches. */
  readonly score: number
  /** For anything but an exact match: what was used instead, to show the user. */
  readonly warning?: string
}

export interface ResolveOptions {
  /** The file the blocks come from, for messages (default: the first block's source file). */
  readonly file?: string
  /** The file's id sidecar: makes short ids of retired blocks and old paths of renamed ones known. */
  readonly sidecar?: BlockIdSidecar
  /** Lowest similarity a fuzzy match may have (default 0.6). */
  readonly threshold?: number
}

const AMBIGUITY_MARGIN = 0.05
const SUGGESTION_FLOOR = 0.3

const readablePath = (id: string): string => splitId(id).map(unescapeSegment).join("/")

export const resolveBlock = (
  parsed: ReadonlyArray<Block>,
  ref: string,
  options: ResolveOptions = {}
): Either.Either<Resolution, BlockNotFound> => {
  const parsedAll = flattenBlocks(parsed)
  const file = options.file ?? parsedAll[0]?.source.file ?? "(empty file)"
  const blocks =
    options.sidecar !== undefined && parsedAll.every((b) => b.shortId === undefined)
      ? syncBlockIds(parsed, options.sidecar, file).blocks
      : parsed
  const all = blocks === parsed ? parsedAll : flattenBlocks(blocks)
  const threshold = options.threshold ?? 0.6
  const notFound = (reason: string, suggestions: ReadonlyArray<string>) =>
    Either.left(new BlockNotFound({ file, ref, reason, suggestions: [...suggestions] }))

  // A short id the sidecar never handed out is unknown, even if syncing just gave it to a new heading.
  const unknownShortId =
    ref.startsWith(SHORT_ID_PREFIX) &&
    blocks !== parsed &&
    !options.sidecar!.blocks.some((entry) => `${SHORT_ID_PREFIX}${entry.id}` === ref)
  const exact = unknownShortId ? undefined : getBlockById(blocks, ref)
  if (exact !== undefined) return Either.right({ block: exact, match: "exact", ref, score: 1 })

  if (ref.startsWith(SHORT_ID_PREFIX)) {
    const shortId = ref.slice(SHORT_ID_PREFIX.length)
    const retired = options.sidecar?.retired.includes(shortId) ?? false
    return notFound(retired ? "the block with this id was deleted" : "no block has this short id", [])
  }

  const alias = options.sidecar?.blocks.find((entry) => entry.aliases.includes(ref))
  const renamedTo =
    alias === undefined ? undefined : all.find((b) => b.shortId === alias.id || b.id === alias.path)
  if (renamedTo !== undefined) {
    return Either.right({
      block: renamedTo,
      match: "renamed",
      ref,
      score: 1,
      warning: `"${ref}" in ${file} was renamed; using "${renamedTo.id}"`
    })
  }

  const wanted = normalizeForMatch(readablePath(ref))
  const normalized = all.filter((b) => normalizeForMatch(readablePath(b.id)) === wanted)
  if (normalized.length === 1) {
    const block = normalized[0]!
    return Either.right({
      block,
      match: "normalized",
      ref,
      score: 1,
      warning: `"${ref}" not found in ${file}; using "${block.id}" (differs in case or spacing)`
    })
  }

  const oneSegment = splitId(ref).length === 1
  const wantedHeading = normalizeForMatch(unescapeSegment(ref))
  const byHeading = oneSegment ? all.filter((b) => normalizeForMatch(b.heading) === wantedHeading) : []
  if (byHeading.length === 1) {
    const block = byHeading[0]!
    return Either.right({
      block,
      match: "normalized",
      ref,
      score: 1,
      warning: `"${ref}" is a heading, not a full id in ${file}; using "${block.id}"`
    })
  }
  // A renamed heading keeps its depth: a multi-segment reference is compared with blocks as deep.
  const depth = splitId(ref).length
  const scored = all
    .filter((block) => oneSegment || splitId(block.id).length === depth)
    .map((block) => {
      const byPath = similarity(normalizeForMatch(readablePath(block.id)), wanted)
      const byHeading = oneSegment ? 0.95 * similarity(normalizeForMatch(block.heading), wantedHeading) : 0
      return { block, score: Math.max(byPath, byHeading) }
    })
    .sort((a, b) => b.score - a.score)
  const suggestions = scored
    .filter((s) => s.score >= SUGGESTION_FLOOR)
    .slice(0, 3)
    .map((s) => s.block.id)
  const best = scored[0]
  if (best === undefined) return notFound("the file has no blocks", [])
  if (best.score < threshold) return notFound("no heading is close enough", suggestions)
  const second = scored[1]
  if (second !== undefined && best.score - second.score < AMBIGUITY_MARGIN) {
    return notFound("several headings match equally well", suggestions)
  }
  return Either.right({
    block: best.block,
    match: "fuzzy",
    ref,
    score: best.score,
    warning: `"${ref}" not found in ${file}; using the closest heading "${best.block.id}" (similarity ${best.score.toFixed(2)})`
  })
}
