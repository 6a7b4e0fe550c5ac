/**
 * A block is one addressable piece of a file: a Markdown heading section or a JSON key.
 *
 * Ids are heading paths (`基本信息/教育背景`) built from escaped segments:
 * - `\` is written `\\` and `/` is written `\/` inside a segment, so `A/B` as one heading is `A\/B`;
 * - a segment that starts with `^` is written `\^...` (a leading `^` marks a persistent short id);
 * - the second and later siblings with the same heading get `~2`, `~3`, ... (skipping any suffix a
 *   sibling already spells literally), so ids are unique and deterministic;
 * - an empty heading is the segment `(untitled)`.
 *
 * Text before the first Markdown heading is the preamble block, id `_preamble`, level 0.
 */
export interface Block {
  /** Heading path, unique within the file. */
  readonly id: string
  /** Heading text as a reader sees it (inline markup removed), or the JSON key. */
  readonly heading: string
  /** Markdown: 1..6 (0 for the preamble). JSON: depth of the key, 1 for top-level keys. */
  readonly level: number
  /**
   * Markdown: the body without the heading and without child blocks, leading and trailing blank
   * lines removed. JSON: the source text of the value (children included: a JSON value without its
   * children is not JSON).
   */
  readonly content: string
  readonly children: ReadonlyArray<Block>
  readonly source: BlockSource
  /** Persistent short id (V2, see `BlockIds.syncBlockIds`), referenced as `^<shortId>`. */
  readonly shortId?: string
}

export interface BlockSource {
  readonly file: string
  /** 1-based, the heading line (the first line of a setext heading). */
  readonly startLine: number
  /** 1-based, inclusive: the last line before the next heading of the same or a higher level, or the last line of the file. */
  readonly endLine: number
}

export const PREAMBLE_ID = "_preamble"
export const UNTITLED_SEGMENT = "(untitled)"
export const SHORT_ID_PREFIX = "^"

/** Escapes one heading for use as an id segment. */
export const escapeSegment = (heading: string): string => {
  if (heading === "") return UNTITLED_SEGMENT
  const escaped = heading.replace(/[\\/]/g, (c) => `\\${c}`)
  return escaped.startsWith(SHORT_ID_PREFIX) ? `\\${escaped}` : escaped
}

/** Splits an id into its segments, still escaped. `A\/B/C` gives `["A\/B", "C"]`. */
export const splitId = (id: string): Array<string> => {
  const segments: Array<string> = []
  let current = ""
  for (let i = 0; i < id.length; i++) {
    const c = id[i]!
    if (c === "\\" && i + 1 < id.length) {
      current += c + id[i + 1]
      i++
    } else if (c === "/") {
      segments.push(current)
      current = ""
    } else {
      current += c
    }
  }
  segments.push(current)
  return segments
}

/** The heading text a segment spells, escapes removed. */
export const unescapeSegment = (segment: string): string => segment.replace(/\\(.)/g, "$1")

export const joinId = (parentId: string | undefined, segment: string): string =>
  parentId === undefined ? segment : `${parentId}/${segment}`

/**
 * Assigns unique segments to one group of siblings, in order. The first occurrence of a heading
 * keeps its plain segment; later ones get `~2`, `~3`, ... skipping suffixes that are taken.
 */
export const uniqueSegments = (
  headings: ReadonlyArray<string>,
  reserved: ReadonlyArray<string> = []
): Array<string> => {
  const plain = headings.map(escapeSegment)
  const taken = new Set<string>(reserved)
  const literal = new Set(plain)
  const out: Array<string> = []
  for (const segment of plain) {
    if (!taken.has(segment)) {
      taken.add(segment)
      out.push(segment)
      continue
    }
    let n = 2
    while (taken.has(`${segment}~${n}`) || literal.has(`${segment}~${n}`)) n++
    const unique = `${segment}~${n}`
    taken.add(unique)
    out.push(unique)
  }
  return out
}

/** Every block of the tree in document order (pre-order: a parent before its children). */
export const flattenBlocks = (blocks: ReadonlyArray<Block>): Array<Block> => {
  const out: Array<Block> = []
  const visit = (list: ReadonlyArray<Block>) => {
    for (const block of list) {
      out.push(block)
      if (block.children.length > 0) visit(block.children)
    }
  }
  visit(blocks)
  return out
}

/**
 * Finds a block by its exact id: a heading path (`Parent/Child`) or a persistent short id written
 * `^b3`. No fuzzy matching here: `BlockResolver.resolveBlock` does that and says so.
 */
export const getBlockById = (blocks: ReadonlyArray<Block>, id: string): Block | undefined => {
  if (id.startsWith(SHORT_ID_PREFIX)) {
    const shortId = id.slice(SHORT_ID_PREFIX.length)
    return findFirst(blocks, (block) => block.shortId === shortId)
  }
  // A block's id is a prefix of its descendants' ids, so only matching subtrees are searched.
  for (const block of blocks) {
    if (block.id === id) return block
    if (id.startsWith(`${block.id}/`)) {
      const inChild = getBlockById(block.children, id)
      if (inChild !== undefined) return inChild
    }
  }
  return undefined
}

const findFirst = (blocks: ReadonlyArray<Block>, predicate: (block: Block) => boolean): Block | undefined => {
  for (const block of blocks) {
    if (predicate(block)) return block
    const inChild = findFirst(block.children, predicate)
    if (inChild !== undefined) return inChild
  }
  return undefined
}

/** Splits text into lines the way the parsers count them (CRLF and CR are line endings). */
export const toLines = (text: string): Array<string> => {
  const lines = text.split(/\r\n|\r|\n/)
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop()
  return lines
}

/**
 * The text of a block with its heading and all its children: lines `startLine..endLine` of the file
 * it was parsed from, without trailing blank lines. This is what a block reference such as
 * `[profile.md#基本信息]` resolves to.
 */
export const blockText = (fileContent: string, block: Block): string =>
  sliceLines(fileContent, block.source.startLine, block.source.endLine).replace(/(\n[ \t]*)+$/, "")

/** Lines `start..end` (1-based, inclusive) of a text, joined with `\n`. */
export const sliceLines = (text: string, start: number, end: number): string =>
  toLines(text)
    .slice(start - 1, end)
    .join("\n")
