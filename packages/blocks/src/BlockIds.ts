/**
 * V2 block ids: persistent short ids kept in a sidecar `<file>.blocks.json` beside the file.
 *
 * `syncBlockIds` is pure: it takes the blocks just parsed and the sidecar read before (if any) and
 * returns the blocks with `shortId` set, the sidecar to write back, and what changed. A heading that
 * is renamed keeps its id (matched by its place and content), a section that moves keeps its id
 * (matched by content), and the id of a deleted heading is retired and never handed out again.
 * The old paths of a renamed block are kept as aliases, so references written before the rename
 * still resolve (`BlockResolver.resolveBlock`). Reading and writing the sidecar is the caller's job.
 */
import { problemOf } from "@ctxo/store/DecodeError"
import { Either, Schema } from "effect"
import type { Block } from "./Block.ts"
import { flattenBlocks, splitId, unescapeSegment } from "./Block.ts"
import { InvalidSidecar } from "./BlockErrors.ts"
import { normalizeForMatch, similarity } from "./internal/similarity.ts"

export const SIDECAR_FORMAT = "ctxo.blocks/v1"
const MAX_ALIASES = 10
const RENAME_THRESHOLD = 0.6
const NEW_PARENT = "\u0000new"

export const SidecarEntry = Schema.Struct({
  id: Schema.String,
  path: Schema.String,
  heading: Schema.String,
  level: Schema.Int,
  parent: Schema.NullOr(Schema.String),
  hash: Schema.String,
  aliases: Schema.Array(Schema.String)
})
export type SidecarEntry = typeof SidecarEntry.Type

export const BlockIdSidecar = Schema.Struct({
  format: Schema.Literal(SIDECAR_FORMAT),
  file: Schema.String,
  next: Schema.Int.pipe(Schema.positive()),
  blocks: Schema.Array(SidecarEntry),
  retired: Schema.Array(Schema.String)
})
export type BlockIdSidecar = typeof BlockIdSidecar.Type

/** Where the sidecar of a file lives: `profile.md` -> `profile.md.blocks.json`. */
export const sidecarPath = (file: string): string => `${file}.blocks.json`

const decode = Schema.decodeUnknownEither(Schema.parseJson(BlockIdSidecar))

/** Parses a sidecar's text; a malformed one is an `InvalidSidecar` naming the sidecar file. */
export const decodeSidecar = (
  text: string,
  sidecarFile: string
): Either.Either<BlockIdSidecar, InvalidSidecar> =>
  decode(text).pipe(
    Either.mapLeft((error) => new InvalidSidecar({ file: sidecarFile, reason: problemOf(error) }))
  )

/** The sidecar as stable, diff-friendly JSON text (two-space indent, trailing newline). */
export const encodeSidecar = (sidecar: BlockIdSidecar): string => `${JSON.stringify(sidecar, null, 2)}\n`

/** FNV-1a (32-bit) of a block's content: cheap, stable, and enough to recognise moved text. */
export const contentHash = (text: string): string => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193)
  }
  return (hash >>> 0).toString(16).padStart(8, "0")
}

export interface BlockIdChanges {
  readonly added: ReadonlyArray<{ readonly id: string; readonly path: string }>
  readonly renamed: ReadonlyArray<{ readonly id: string; readonly from: string; readonly to: string }>
  readonly removed: ReadonlyArray<{ readonly id: string; readonly path: string }>
}

export interface SyncedBlockIds {
  readonly blocks: Array<Block>
  readonly sidecar: BlockIdSidecar
  readonly changes: BlockIdChanges
  /** True when the sidecar differs from the one passed in (or there was none): write it back. */
  readonly changed: boolean
}

const lastSegment = (path: string): string => {
  const segments = splitId(path)
  return segments[segments.length - 1]!
}

const headingOf = (path: string) => normalizeForMatch(unescapeSegment(lastSegment(path)))

/** Assigns persistent short ids to a file's blocks, reusing those of `previous` wherever it can. */
export const syncBlockIds = (
  blocks: ReadonlyArray<Block>,
  previous: BlockIdSidecar | undefined,
  file: string
): SyncedBlockIds => {
  const prevEntries = previous?.blocks ?? []
  const unmatched = new Set(prevEntries)
  // An old entry whose path still exists belongs to that path; other passes must not take it.
  const currentIds = new Set(flattenBlocks(blocks).map((b) => b.id))
  const claimedByPath = new Set(prevEntries.filter((e) => currentIds.has(e.path)))
  let next = previous?.next ?? 1
  const entries: Array<SidecarEntry> = []
  const added: Array<{ id: string; path: string }> = []
  const renamed: Array<{ id: string; from: string; to: string }> = []

  const hashes = new Map<Block, string>()
  const hashOf = (block: Block) => {
    let hash = hashes.get(block)
    if (hash === undefined) {
      hash = contentHash(block.content)
      hashes.set(block, hash)
    }
    return hash
  }

  const take = (candidates: Iterable<SidecarEntry>, accept: (e: SidecarEntry) => boolean) => {
    for (const entry of candidates) if (unmatched.has(entry) && accept(entry)) return entry
    return undefined
  }

  // Pass 1, top-down one sibling group at a time: find each block's old entry, if it has one.
  const matches = new Map<Block, SidecarEntry>()
  const match = (group: ReadonlyArray<Block>, parentSid: string | null) => {
    const siblings = prevEntries.filter((e) => e.parent === parentSid)
    const matched: Array<SidecarEntry | undefined> = group.map(() => undefined)
    const claim = (i: number, entry: SidecarEntry | undefined) => {
      if (entry === undefined) return
      matched[i] = entry
      unmatched.delete(entry)
    }
    const free = (e: SidecarEntry) => !claimedByPath.has(e)
    // 1. same place, same heading
    for (const [i, b] of group.entries()) {
      claim(
        i,
        take(siblings, (e) => lastSegment(e.path) === lastSegment(b.id))
      )
    }
    // 2. same place, same content: a renamed heading
    group.forEach((b, i) => {
      if (matched[i] || b.content === "") return
      claim(
        i,
        take(siblings, (e) => free(e) && e.level === b.level && e.hash === hashOf(b))
      )
    })
    // 3. same content anywhere: a moved section
    group.forEach((b, i) => {
      if (matched[i] || b.content === "") return
      claim(
        i,
        take(prevEntries, (e) => free(e) && e.level === b.level && e.hash === hashOf(b))
      )
    })
    // 4. same place, similar heading: renamed and edited
    group.forEach((b, i) => {
      if (matched[i]) return
      const heading = normalizeForMatch(b.heading)
      let best: SidecarEntry | undefined
      let bestScore = RENAME_THRESHOLD
      for (const e of siblings) {
        if (!unmatched.has(e) || !free(e) || e.level !== b.level) continue
        const score = similarity(headingOf(e.path), heading)
        if (score >= bestScore) {
          best = e
          bestScore = score
        }
      }
      claim(i, best)
    })
    group.forEach((b, i) => {
      const entry = matched[i]
      if (entry !== undefined) matches.set(b, entry)
      // Children of a new block can only be matched by content (pass 3): no old entry has it as parent.
      match(b.children, entry?.id ?? NEW_PARENT)
    })
  }
  match(blocks, null)

  // Pass 2, in document order: keep matched ids, hand out new ones, record renames.
  const assign = (group: ReadonlyArray<Block>, parentSid: string | null): Array<Block> =>
    group.map((block) => {
      const old = matches.get(block)
      let shortId: string
      let aliases: ReadonlyArray<string> = []
      if (old === undefined) {
        shortId = `b${(next++).toString(36)}`
        added.push({ id: shortId, path: block.id })
      } else {
        shortId = old.id
        aliases = old.aliases
        if (old.path !== block.id) {
          renamed.push({ id: shortId, from: old.path, to: block.id })
          aliases = [old.path, ...aliases.filter((a) => a !== old.path && a !== block.id)].slice(
            0,
            MAX_ALIASES
          )
        }
      }
      entries.push({
        id: shortId,
        path: block.id,
        heading: block.heading,
        level: block.level,
        parent: parentSid,
        hash: hashOf(block),
        aliases
      })
      return { ...block, shortId, children: assign(block.children, shortId) }
    })
  const withIds = assign(blocks, null)
  const removed = [...unmatched].map((e) => ({ id: e.id, path: e.path }))

  const sidecar: BlockIdSidecar = {
    format: SIDECAR_FORMAT,
    file,
    next,
    blocks: entries,
    retired: [...(previous?.retired ?? []), ...removed.map((r) => r.id)]
  }
  const changed = previous === undefined || encodeSidecar(previous) !== encodeSidecar(sidecar)
  return { blocks: withIds, sidecar, changes: { added, renamed, removed }, changed }
}
