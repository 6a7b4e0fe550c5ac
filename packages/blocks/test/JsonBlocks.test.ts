import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { flattenBlocks, getBlockById } from "../src/Block.ts"
import { parseJsonBlocks } from "../src/JsonBlocks.ts"

const config = `{
  "systemPrompt": [
    { "type": "global", "file": "system-prompt.md" }
  ],
  "chatHistory": {
    "source": "messages.json",
    "maxTurns": 10
  },
  "a/b": true
}
`

const blocksOf = (text: string) => Either.getOrThrow(parseJsonBlocks(text, "context-config.json"))

describe("parseJsonBlocks", () => {
  it("splits by key path with line ranges", () => {
    const summary = flattenBlocks(blocksOf(config)).map(
      (b) => `${b.id} d${b.level} L${b.source.startLine}-${b.source.endLine}`
    )
    expect(summary).toEqual([
      "systemPrompt d1 L2-4",
      "systemPrompt/0 d2 L3-3",
      "systemPrompt/0/type d3 L3-3",
      "systemPrompt/0/file d3 L3-3",
      "chatHistory d1 L5-8",
      "chatHistory/source d2 L6-6",
      "chatHistory/maxTurns d2 L7-7",
      "a\\/b d1 L9-9"
    ])
  })

  it("gives each block the source text of its value", () => {
    const blocks = blocksOf(config)
    expect(getBlockById(blocks, "chatHistory/maxTurns")?.content).toBe("10")
    expect(JSON.parse(getBlockById(blocks, "chatHistory")!.content)).toEqual({
      source: "messages.json",
      maxTurns: 10
    })
    expect(getBlockById(blocks, "a\\/b")?.heading).toBe("a/b")
  })

  it("gives CRLF the same blocks as LF, and duplicate keys distinct ids", () => {
    expect(blocksOf(config.replace(/\n/g, "\r\n"))).toEqual(blocksOf(config))
    expect(flattenBlocks(blocksOf('{"k": 1, "k": 2}')).map((b) => b.id)).toEqual(["k", "k~2"])
  })

  it("has no blocks for a scalar or an empty container", () => {
    expect(blocksOf("42")).toEqual([])
    expect(blocksOf("{}")).toEqual([])
    expect(blocksOf("[]")).toEqual([])
  })

  it.each([
    ['{\n  "a": 1,\n}', 3, 1, "PropertyNameExpected"],
    ['{\n  "a": 1 // note\n}', 2, 10, "InvalidCommentToken"],
    ['{"a": 01}', 1, 8, "CommaExpected"],
    ["", 1, 1, "ValueExpected"],
    ['{"a": "unterminated', 1, 7, "UnexpectedEndOfString"]
  ])("reports invalid JSON %j with file, line and column", (text, line, column, reason) => {
    const result = parseJsonBlocks(text, "conf/x.json")
    expect(Either.isLeft(result)).toBe(true)
    const error = Either.getLeft(result).pipe((o) => (o._tag === "Some" ? o.value : undefined))!
    expect({ file: error.file, line: error.line, column: error.column }).toEqual({
      file: "conf/x.json",
      line,
      column
    })
    expect(error.reason).toContain(reason)
    expect(error.message).toBe(
      `Invalid JSON in conf/x.json at line ${line}, column ${column}: ${error.reason}`
    )
  })
})
