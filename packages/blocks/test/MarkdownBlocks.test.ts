import { readFileSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"
import { blockText, flattenBlocks, getBlockById, PREAMBLE_ID } from "../src/Block.ts"
import { parseMarkdownBlocks } from "../src/MarkdownBlocks.ts"

const seedProfile = [
  "# 基本信息",
  "25岁，计算机专业研究生",
  "",
  "## 教育背景",
  "本科: 软件工程",
  "研究生: 计算机科学",
  "",
  "## 工作经验",
  "3年后端开发",
  "",
  "# 学习目标",
  "深入理解分布式系统原理",
  ""
].join("\n")

const summary = (markdown: string) =>
  flattenBlocks(parseMarkdownBlocks(markdown, "doc.md")).map(
    (b) =>
      `${b.id} h${b.level} L${b.source.startLine}${b.source.endLine === b.source.startLine ? "" : `-${b.source.endLine}`}`
  )

describe("parseMarkdownBlocks", () => {
  it("parses the seed's profile example into the documented tree", () => {
    const blocks = parseMarkdownBlocks(seedProfile, "profile.md")
    expect(blocks.map((b) => b.id)).toEqual(["基本信息", "学习目标"])
    const [info, goals] = blocks
    expect(info!.content).toBe("25岁，计算机专业研究生")
    expect(info!.children.map((c) => [c.id, c.heading, c.level, c.content])).toEqual([
      ["基本信息/教育背景", "教育背景", 2, "本科: 软件工程\n研究生: 计算机科学"],
      ["基本信息/工作经验", "工作经验", 2, "3年后端开发"]
    ])
    // A block runs to the line before the next heading of the same or a higher level.
    expect(info!.source).toEqual({ file: "profile.md", startLine: 1, endLine: 10 })
    expect(info!.children[0]!.source).toEqual({ file: "profile.md", startLine: 4, endLine: 7 })
    expect(goals!.source).toEqual({ file: "profile.md", startLine: 11, endLine: 12 })
    expect(goals!.content).toBe("深入理解分布式系统原理")
  })

  it("finds a Chinese path id and gives the block's text with its children", () => {
    const blocks = parseMarkdownBlocks(seedProfile, "profile.md")
    expect(getBlockById(blocks, "基本信息/工作经验")?.content).toBe("3年后端开发")
    expect(blockText(seedProfile, getBlockById(blocks, "基本信息")!)).toBe(
      seedProfile.split("\n").slice(0, 9).join("\n")
    )
    expect(getBlockById(blocks, "基本信息/不存在")).toBeUndefined()
  })

  it("recognises setext headings, including multi-line ones", () => {
    expect(summary("Title\n=====\nbody\n\nSub\npart\n---\nmore\n")).toEqual([
      "Title h1 L1-8",
      "Title/Sub part h2 L5-8"
    ])
  })

  it("ignores heading-like lines in code, HTML, quotes and list items", () => {
    const markdown = [
      "# Real", //  1
      "```", //      2
      "# not a heading in a fence",
      "```",
      "", //         5
      "    # indented code",
      "",
      "<div>",
      "# inside an HTML block",
      "</div>", //   10
      "",
      "> # quoted",
      "",
      "- # in a list item",
      "", //         15
      "## Also real",
      "text"
    ].join("\n")
    expect(summary(markdown)).toEqual(["Real h1 L1-17", "Real/Also real h2 L16-17"])
  })

  it("keeps YAML front matter out of the headings and in the preamble", () => {
    const markdown = "---\ntitle: x\n---\nIntro\n\n# One\n"
    const blocks = parseMarkdownBlocks(markdown, "doc.md")
    expect(blocks.map((b) => b.id)).toEqual([PREAMBLE_ID, "One"])
    expect(blocks[0]!.content).toBe("---\ntitle: x\n---\nIntro")
    expect(blocks[0]!.source).toEqual({ file: "doc.md", startLine: 1, endLine: 5 })
    // Without a closing delimiter there is no front matter: `---` is a thematic break.
    expect(summary("---\n# A\ntext\n")).toEqual(["_preamble h0 L1", "A h1 L2-3"])
  })

  it("makes text before the first heading addressable as the preamble", () => {
    const blocks = parseMarkdownBlocks("Intro line\nmore\n\n# A\nbody\n", "doc.md")
    expect(getBlockById(blocks, PREAMBLE_ID)).toMatchObject({
      heading: "",
      level: 0,
      content: "Intro line\nmore",
      source: { startLine: 1, endLine: 3 }
    })
    // Only blank lines before the first heading: no preamble.
    expect(summary("\n\n# A\n")).toEqual(["A h1 L3"])
    // A heading literally named like the preamble does not collide with it.
    expect(summary("intro\n# _preamble\n").map((s) => s.split(" ")[0])).toEqual(["_preamble", "_preamble~2"])
  })

  it("gives duplicate siblings distinct, deterministic ids", () => {
    const ids = summary("# A\n## X\n## X\n## X~2\n## X\n# A\n").map((s) => s.split(" ")[0])
    expect(ids).toEqual(["A", "A/X", "A/X~3", "A/X~2", "A/X~4", "A~2"])
    expect(new Set(ids).size).toBe(ids.length)
  })

  it("escapes / in headings and a leading ^", () => {
    const blocks = parseMarkdownBlocks("# Input/Output\n## a\\b\n# ^note\n", "doc.md")
    const ids = flattenBlocks(blocks).map((b) => b.id)
    expect(ids).toEqual(["Input\\/Output", "Input\\/Output/a\\\\b", "\\^note"])
    expect(flattenBlocks(blocks).map((b) => b.heading)).toEqual(["Input/Output", "a\\b", "^note"])
    for (const id of ids) expect(getBlockById(blocks, id)?.id).toBe(id)
  })

  it("uses the text a reader sees as the heading", () => {
    const blocks = parseMarkdownBlocks("# The **`compile`** [step](http://x) ##\n#\n", "doc.md")
    expect(blocks.map((b) => [b.id, b.heading])).toEqual([
      ["The compile step", "The compile step"],
      ["(untitled)", ""]
    ])
  })

  it("gives CRLF and CR files the same blocks as LF", () => {
    const crlf = seedProfile.replace(/\n/g, "\r\n")
    const cr = seedProfile.replace(/\n/g, "\r")
    expect(parseMarkdownBlocks(crlf, "profile.md")).toEqual(parseMarkdownBlocks(seedProfile, "profile.md"))
    expect(parseMarkdownBlocks(cr, "profile.md")).toEqual(parseMarkdownBlocks(seedProfile, "profile.md"))
  })

  it("nests skipped levels under the nearest shallower heading", () => {
    expect(summary("# A\n### deep\n## B\n#### deeper\n# C\n")).toEqual([
      "A h1 L1-4",
      "A/deep h3 L2",
      "A/B h2 L3-4",
      "A/B/deeper h4 L4",
      "C h1 L5"
    ])
  })

  it("parses the example profile shipped in fixtures", () => {
    const path = new URL("../../../fixtures/docs/profile.md", import.meta.url)
    const blocks = parseMarkdownBlocks(readFileSync(path, "utf8"), "profile.md")
    expect(flattenBlocks(blocks).map((b) => b.id)).toEqual([
      PREAMBLE_ID,
      "基本信息",
      "基本信息/教育背景",
      "基本信息/工作经验",
      "学习目标",
      "学习目标/近期 \\/ 本季度",
      "已有基础"
    ])
  })

  it("returns no blocks for empty or blank input", () => {
    expect(parseMarkdownBlocks("", "doc.md")).toEqual([])
    expect(parseMarkdownBlocks("\n \n\t\n", "doc.md")).toEqual([])
  })
})
