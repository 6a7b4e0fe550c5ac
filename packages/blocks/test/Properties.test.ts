import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import fc from "fast-check"
import type { Block } from "../src/Block.ts"
import { flattenBlocks, getBlockById, toLines } from "../src/Block.ts"
import { syncBlockIds } from "../src/BlockIds.ts"
import { parseJsonBlocks } from "../src/JsonBlocks.ts"
import { parseMarkdownBlocks } from "../src/MarkdownBlocks.ts"

const words = fc.constantFrom(
  "alpha",
  "beta",
  "Beta",
  "基本信息",
  "教育/背景",
  "a\\b",
  "^x",
  "~2",
  "`code`",
  "*em*",
  ""
)
const markdownLine = fc.oneof(
  fc.tuple(fc.integer({ min: 1, max: 7 }), words).map(([n, w]) => `${"#".repeat(n)} ${w}`),
  fc
    .tuple(fc.integer({ min: 0, max: 4 }), fc.constantFrom("#", "##", "###"))
    .map(([n, h]) => `${" ".repeat(n)}${h} x`),
  fc.constantFrom(
    "===",
    "---",
    "```",
    "~~~",
    "> # quoted",
    "- # item",
    "1. # item",
    "<div>",
    "</div>",
    "..."
  ),
  words,
  fc.constant(""),
  fc.string({ maxLength: 12 })
)
// Often opens with `---` so that front matter, closed or not, at the end of the file or not, is common.
const markdownDoc = fc
  .tuple(
    fc.boolean(),
    fc.array(markdownLine, { maxLength: 40 }),
    fc.constantFrom("\n", "\r\n", "\r"),
    fc.boolean()
  )
  .map(
    ([frontMatter, lines, eol, trailing]) =>
      (frontMatter ? ["---", ...lines] : lines).join(eol) + (trailing ? eol : "")
  )
const anyText = fc.oneof(markdownDoc, fc.string({ unit: "binary", maxLength: 300 }))

const checkTree = (blocks: ReadonlyArray<Block>, lineCount: number) => {
  const all = flattenBlocks(blocks)
  expect(new Set(all.map((b) => b.id)).size).toBe(all.length)
  for (const block of all) {
    expect(getBlockById(blocks, block.id)).toBe(block)
    expect(block.source.startLine).toBeGreaterThanOrEqual(1)
    expect(block.source.endLine).toBeGreaterThanOrEqual(block.source.startLine)
    expect(block.source.endLine).toBeLessThanOrEqual(Math.max(lineCount, 1))
    let previousEnd = block.source.startLine
    for (const child of block.children) {
      expect(child.source.startLine).toBeGreaterThan(
        previousEnd === block.source.startLine ? previousEnd - 1 : previousEnd
      )
      expect(child.source.startLine).toBeGreaterThanOrEqual(block.source.startLine)
      expect(child.source.endLine).toBeLessThanOrEqual(block.source.endLine)
      previousEnd = child.source.endLine
    }
  }
}

describe("properties", () => {
  it("parseMarkdownBlocks never throws; ids are unique and round-trip; child ranges nest", () => {
    fc.assert(
      fc.property(anyText, (text) => {
        const blocks = parseMarkdownBlocks(text, "doc.md")
        checkTree(blocks, toLines(text).length)
      }),
      { numRuns: 1500 }
    )
  })

  it("loses no text: every non-blank line is inside a top-level block", () => {
    fc.assert(
      fc.property(markdownDoc, (text) => {
        const blocks = parseMarkdownBlocks(text, "doc.md")
        const covered = new Set<number>()
        for (const b of blocks) for (let l = b.source.startLine; l <= b.source.endLine; l++) covered.add(l)
        toLines(text).forEach((line, i) => {
          if (line.trim() !== "") expect(covered.has(i + 1)).toBe(true)
        })
      }),
      { numRuns: 800 }
    )
  })

  it("is deterministic and line-ending independent", () => {
    fc.assert(
      fc.property(fc.array(markdownLine, { maxLength: 30 }), (lines) => {
        const lf = parseMarkdownBlocks(lines.join("\n"), "doc.md")
        expect(parseMarkdownBlocks(lines.join("\n"), "doc.md")).toEqual(lf)
        expect(parseMarkdownBlocks(lines.join("\r\n"), "doc.md")).toEqual(lf)
      }),
      { numRuns: 500 }
    )
  })

  it("syncBlockIds gives unique short ids and is stable on an unchanged file", () => {
    fc.assert(
      fc.property(markdownDoc, (text) => {
        const first = syncBlockIds(parseMarkdownBlocks(text, "doc.md"), undefined, "doc.md")
        const shortIds = flattenBlocks(first.blocks).map((b) => b.shortId)
        expect(new Set(shortIds).size).toBe(shortIds.length)
        const second = syncBlockIds(parseMarkdownBlocks(text, "doc.md"), first.sidecar, "doc.md")
        expect(second.changed).toBe(false)
        for (const b of flattenBlocks(second.blocks))
          expect(getBlockById(second.blocks, `^${b.shortId}`)).toBe(b)
      }),
      { numRuns: 300 }
    )
  })

  it("parseJsonBlocks never throws and gives each key its own value", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 200 }), (text) => {
        parseJsonBlocks(text, "x.json")
      }),
      { numRuns: 1000 }
    )
    fc.assert(
      fc.property(fc.json(), fc.boolean(), (json, pretty) => {
        const text = pretty ? JSON.stringify(JSON.parse(json), null, 2) : json
        const blocks = Either.getOrThrow(parseJsonBlocks(text, "x.json"))
        checkTree(blocks, toLines(text).length)
        const root = JSON.parse(text)
        for (const block of flattenBlocks(blocks)) {
          expect(JSON.parse(block.content)).toEqual(valueAt(root, block, blocks))
        }
      }),
      { numRuns: 500 }
    )
  })
})

/** The value a block stands for, found by walking its ancestors' headings from the root. */
const valueAt = (root: unknown, target: Block, blocks: ReadonlyArray<Block>): unknown => {
  const path: Array<string> = []
  const find = (list: ReadonlyArray<Block>): boolean => {
    for (const b of list) {
      path.push(b.heading)
      if (b === target || find(b.children)) return true
      path.pop()
    }
    return false
  }
  find(blocks)
  // Duplicate keys: JSON.parse keeps the last one, as the block of the last occurrence does.
  return path.reduce<unknown>((value, key) => (value as Record<string, unknown>)[key], root)
}
