/**
 * Markdown -> block tree. Headings are found by markdown-it's CommonMark block parser (ATX and
 * setext headings; none inside fenced or indented code, HTML blocks, block quotes or list items),
 * never by regular expressions. YAML front matter (`---` on line 1 up to a closing `---` or `...`)
 * is not parsed as Markdown; it belongs to the preamble.
 */
import type { Token } from "markdown-it"
import MarkdownIt from "markdown-it"
import type { Block } from "./Block.ts"
import { joinId, PREAMBLE_ID, uniqueSegments } from "./Block.ts"

export interface MarkdownOptions {
  /** Treat a leading `---` ... `---` section as YAML front matter (default true). */
  readonly frontMatter?: boolean
}

/** A document-level heading as the block parser reports it (0-based lines, end exclusive). */
export interface HeadingToken {
  readonly level: number
  readonly line: number
  readonly endLine: number
  readonly text: string
}

// Only the block tokenizer runs (no core chain, no inline rules): it yields heading tokens with
// line maps, and its state has the line offsets the bodies are cut with. Inline parsing (the
// expensive part of Markdown) runs on heading text alone, and only when it has markup.
const parser = new MarkdownIt("commonmark")

/**
 * The block state, keeping only what blocks are made of. markdown-it's rules push a token for every
 * paragraph, list item and quote, each built by a Token constructor that defines thirteen
 * properties one by one; nothing here renders them. Document-level `heading_open` tokens and the
 * `inline` token that carries their text are kept as plain objects; every other push gets one
 * shared scratch token that rules may write to and nobody reads. Block rules only assign token
 * fields (no Token methods), and the one rule that reads earlier tokens back (tight lists marking
 * paragraphs hidden) only flips `hidden`. The CommonMark conformance test guards all of this.
 */
const scratch = {} as Token

class HeadingsOnlyState extends parser.block.State {
  private keepInline = false

  override push(type: string, tag: string, nesting: -1 | 0 | 1): Token {
    if (nesting < 0) this.level--
    const keep = (type === "heading_open" && this.level === 0) || (type === "inline" && this.keepInline)
    this.keepInline = keep && type === "heading_open"
    let token = scratch
    if (keep) {
      token = {
        type,
        tag,
        map: null,
        nesting,
        level: this.level,
        content: "",
        children: null
      } as unknown as Token
      this.tokens.push(token)
    }
    if (nesting > 0) this.level++
    return token
  }
}

const NEWLINES = /\r\n?/g
const NUL = /\0/g
const INLINE_MARKUP = /[\\`*_&<[\]!]/
const WHITESPACE_RUN = /\s+/g
const NOT_NEWLINE = /[^\n]/g

/** Normalizes line endings to `\n` and NUL to U+FFFD, as CommonMark requires. */
export const normalizeMarkdown = (content: string): string => {
  let out = content
  if (out.indexOf("\r") !== -1) out = out.replace(NEWLINES, "\n")
  if (out.indexOf("\0") !== -1) out = out.replace(NUL, "\uFFFD")
  return out
}

/**
 * Lines `[0, n)` taken by YAML front matter in normalized text, or 0. Front matter opens with `---`
 * as the very first line and closes with a `---` or `...` line; without a closing line there is none.
 */
export const frontMatterLineCount = (normalized: string): number => {
  if (!normalized.startsWith("---")) return 0
  const firstEnd = normalized.indexOf("\n")
  if (firstEnd === -1 || normalized.slice(0, firstEnd).trimEnd() !== "---") return 0
  let line = 1
  let start = firstEnd + 1
  while (start < normalized.length) {
    let end = normalized.indexOf("\n", start)
    if (end === -1) end = normalized.length
    const text = normalized.slice(start, end).trimEnd()
    line++
    if (text === "---" || text === "...") return line
    start = end + 1
  }
  return 0
}

/** The text with its first `count` lines turned into spaces: same offsets, nothing for the parser to see. */
const maskLines = (normalized: string, count: number): string => {
  let offset = 0
  for (let i = 0; i < count && offset < normalized.length; i++) {
    const end = normalized.indexOf("\n", offset)
    offset = end === -1 ? normalized.length : end + 1
  }
  return normalized.slice(0, offset).replace(NOT_NEWLINE, " ") + normalized.slice(offset)
}

/** Plain text of a heading's inline content: emphasis, code spans, links and HTML reduced to their text. */
export const headingText = (raw: string): string => {
  if (!INLINE_MARKUP.test(raw)) return raw.replace(WHITESPACE_RUN, " ").trim()
  const tokens: Array<Token> = []
  parser.inline.parse(raw, parser, {}, tokens)
  let text = ""
  const collect = (list: ReadonlyArray<Token> | null) => {
    if (list === null) return
    for (const token of list) {
      switch (token.type) {
        case "text":
        case "text_special":
        case "code_inline":
          text += token.content
          break
        case "softbreak":
        case "hardbreak":
          text += " "
          break
        case "image":
          collect(token.children)
          break
      }
    }
  }
  collect(tokens)
  return text.replace(WHITESPACE_RUN, " ").trim()
}

interface Scan {
  readonly headings: Array<HeadingToken>
  /** Offsets of each line's start and end (before its `\n`) and of its first non-blank character. */
  readonly bMarks: ReadonlyArray<number>
  readonly eMarks: ReadonlyArray<number>
  readonly tShift: ReadonlyArray<number>
  readonly lineCount: number
  readonly frontMatterLines: number
}

const scan = (normalized: string, options: MarkdownOptions): Scan => {
  const frontMatterLines = options.frontMatter === false ? 0 : frontMatterLineCount(normalized)
  const masked = frontMatterLines > 0 ? maskLines(normalized, frontMatterLines) : normalized
  // The block state drops a last line of only spaces that has no newline: give every line one.
  const src = masked === "" || masked.endsWith("\n") ? masked : `${masked}\n`
  const tokens: Array<Token> = []
  const state = new HeadingsOnlyState(src, parser, {}, tokens)
  if (src !== "") parser.block.tokenize(state, state.line, state.lineMax)
  const headings: Array<HeadingToken> = []
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!
    if (token.type !== "heading_open" || token.level !== 0 || token.map === null) continue
    headings.push({
      level: token.tag.charCodeAt(1) - 48,
      line: token.map[0],
      endLine: token.map[1],
      text: headingText(tokens[i + 1]?.content ?? "")
    })
  }
  return {
    headings,
    bMarks: state.bMarks,
    eMarks: state.eMarks,
    tShift: state.tShift,
    lineCount: state.lineMax,
    frontMatterLines
  }
}

interface Draft {
  readonly heading: HeadingToken | undefined
  readonly level: number
  readonly startLine: number
  readonly bodyStart: number
  bodyEnd: number
  endLine: number
  readonly children: Array<Draft>
}

/** Lines `[from, to)` without leading and trailing blank lines (front matter lines are never blank). */
const isBlankLine = (s: Scan, line: number): boolean =>
  line >= s.frontMatterLines && s.bMarks[line]! + s.tShift[line]! >= s.eMarks[line]!

const bodyText = (text: string, s: Scan, from: number, to: number): string => {
  let start = from
  let end = to
  while (start < end && isBlankLine(s, start)) start++
  while (end > start && isBlankLine(s, end - 1)) end--
  return start === end ? "" : text.slice(s.bMarks[start], s.eMarks[end - 1])
}

/**
 * Parses Markdown into a tree of heading blocks. Never throws: any string gives a (possibly empty)
 * list. Lines are 1-based and inclusive; a block ends on the line before the next heading of the
 * same or a higher level, or on the last line of the file. CRLF and LF give the same blocks.
 */
export const parseMarkdownBlocks = (
  content: string,
  filePath: string,
  options: MarkdownOptions = {}
): Array<Block> => {
  const normalized = normalizeMarkdown(content)
  const scanned = scan(normalized, options)
  const { headings, lineCount } = scanned

  const roots: Array<Draft> = []
  const firstHeadingLine = Math.min(headings.length > 0 ? headings[0]!.line : lineCount, lineCount)
  if (bodyText(normalized, scanned, 0, firstHeadingLine) !== "") {
    roots.push({
      heading: undefined,
      level: 0,
      startLine: 0,
      bodyStart: 0,
      bodyEnd: firstHeadingLine,
      endLine: firstHeadingLine,
      children: []
    })
  }

  const stack: Array<Draft> = []
  for (const heading of headings) {
    while (stack.length > 0 && stack[stack.length - 1]!.level >= heading.level) {
      stack.pop()!.endLine = heading.line
    }
    const draft: Draft = {
      heading,
      level: heading.level,
      startLine: heading.line,
      bodyStart: Math.min(heading.endLine, lineCount),
      bodyEnd: -1,
      endLine: lineCount,
      children: []
    }
    const parent = stack[stack.length - 1]
    if (parent === undefined) {
      roots.push(draft)
    } else {
      if (parent.children.length === 0) parent.bodyEnd = heading.line
      parent.children.push(draft)
    }
    stack.push(draft)
  }

  const build = (drafts: ReadonlyArray<Draft>, parentId: string | undefined): Array<Block> => {
    const titled = drafts.filter((d) => d.heading !== undefined)
    const reserved = parentId === undefined && titled.length < drafts.length ? [PREAMBLE_ID] : []
    const segments = uniqueSegments(
      titled.map((d) => d.heading!.text),
      reserved
    )
    let next = 0
    return drafts.map((draft): Block => {
      const bodyEnd = draft.bodyEnd === -1 ? draft.endLine : draft.bodyEnd
      const source = {
        file: filePath,
        startLine: draft.startLine + 1,
        endLine: Math.max(draft.endLine, draft.startLine + 1)
      }
      if (draft.heading === undefined) {
        return {
          id: PREAMBLE_ID,
          heading: "",
          level: 0,
          content: bodyText(normalized, scanned, draft.bodyStart, bodyEnd),
          children: [],
          source
        }
      }
      const id = joinId(parentId, segments[next++]!)
      return {
        id,
        heading: draft.heading.text,
        level: draft.level,
        content: bodyText(normalized, scanned, draft.bodyStart, bodyEnd),
        children: build(draft.children, id),
        source
      }
    })
  }
  return build(roots, undefined)
}
