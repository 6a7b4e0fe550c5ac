/**
 * The headings that open blocks are exactly the document-level headings of the CommonMark reference
 * implementation (commonmark.js): same level, same start line, on every example of the spec and on
 * a corpus of real-world Markdown.
 */
import { Parser } from "commonmark"
import specModule from "commonmark-spec"
import { describe, expect, it } from "vitest"
import { loadCorpus } from "../bench/corpus.ts"
import { flattenBlocks } from "../src/Block.ts"
import type { MarkdownOptions } from "../src/MarkdownBlocks.ts"
import { frontMatterLineCount, normalizeMarkdown, parseMarkdownBlocks } from "../src/MarkdownBlocks.ts"

interface SpecExample {
  readonly markdown: string
  readonly number: number
  readonly section: string
}

const spec = specModule as unknown as { tests: ReadonlyArray<SpecExample> }
const reference = new Parser()

/** Level and 1-based start line of each top-level heading, per commonmark.js. */
const referenceHeadings = (markdown: string): Array<string> => {
  const out: Array<string> = []
  for (let node = reference.parse(markdown).firstChild; node !== null; node = node.next) {
    if (node.type === "heading") out.push(`h${node.level}@${node.sourcepos[0][0]}`)
  }
  return out
}

const ourHeadings = (markdown: string, options?: MarkdownOptions): Array<string> =>
  flattenBlocks(parseMarkdownBlocks(markdown, "doc.md", options))
    .filter((b) => b.level > 0)
    .map((b) => `h${b.level}@${b.source.startLine}`)

describe("CommonMark spec examples", () => {
  const examples = spec.tests.map((t) => ({ ...t, markdown: t.markdown.replace(/→/g, "\t") }))

  it("ships the whole spec", () => {
    expect(examples.length).toBeGreaterThanOrEqual(650)
  })

  it("finds the reference's document-level headings in every example", () => {
    const mismatches = examples.flatMap((example) => {
      const expected = referenceHeadings(example.markdown)
      const actual = ourHeadings(example.markdown, { frontMatter: false })
      return JSON.stringify(expected) === JSON.stringify(actual)
        ? []
        : [{ number: example.number, expected, actual }]
    })
    // One known, deliberate difference: in example 215 ("[foo]: /url\nbar\n===") the heading text
    // is on line 2 and line 1 is a link reference definition. commonmark.js reports the paragraph's
    // original start (line 1); we start the block where the heading is, so line 1 stays in the preamble.
    expect(mismatches).toEqual([{ number: 215, expected: ["h1@1"], actual: ["h1@2"] }])
  })

  it("covers headings at document level and headings nested in containers", () => {
    let documentLevel = 0
    let nestedOnly = 0
    for (const example of examples) {
      const top = referenceHeadings(example.markdown).length
      let all = 0
      const walker = reference.parse(example.markdown).walker()
      for (let event = walker.next(); event !== null; event = walker.next()) {
        if (event.entering && event.node.type === "heading") all++
      }
      if (top > 0) documentLevel++
      if (all > top) nestedOnly++
    }
    // Nested headings (in quotes and list items) must not open blocks; the examples check both sides.
    expect(documentLevel).toBeGreaterThanOrEqual(30)
    expect(nestedOnly).toBeGreaterThanOrEqual(3)
  })
})

describe("real-world Markdown corpus", () => {
  const corpus = loadCorpus()

  it("has at least 150 files and a megabyte of text", () => {
    expect(corpus.length).toBeGreaterThanOrEqual(150)
    expect(corpus.reduce((bytes, f) => bytes + Buffer.byteLength(f.content), 0)).toBeGreaterThan(1_000_000)
  })

  it("finds the reference's document-level headings in every file", () => {
    const mismatches = corpus.flatMap((file) => {
      // Front matter is not CommonMark: the reference sees those lines blank, as our parser does.
      const normalized = normalizeMarkdown(file.content)
      const skip = frontMatterLineCount(normalized)
      const lines = normalized.split("\n")
      const forReference = lines.map((line, i) => (i < skip ? "" : line)).join("\n")
      const expected = referenceHeadings(forReference)
      const actual = ourHeadings(file.content)
      return JSON.stringify(expected) === JSON.stringify(actual)
        ? []
        : [{ path: file.path, expected, actual }]
    })
    expect(mismatches.slice(0, 5)).toEqual([])
  })
})
