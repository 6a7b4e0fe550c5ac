import { describe, expect, it } from "vitest"
import { accept, suggestionsFor, tokenAt } from "../src/references.ts"

const files = ["guidance.md", "ground-truth.md", "src/auth.ts", "notes.txt"]
const blocks = [
  {
    id: "Tutor guidance",
    heading: "Tutor guidance",
    level: 1,
    startLine: 1,
    endLine: 9,
    children: [
      { id: "Tutor guidance/Style", heading: "Style", level: 2, startLine: 4, endLine: 5, children: [] }
    ]
  }
]

describe("the chat's reference autocomplete", () => {
  it("finds a mention or a reference at the caret, not an @ inside a word", () => {
    expect(tokenAt("see @gui", 8)).toEqual({ kind: "mention", start: 4, typed: "gui" })
    expect(tokenAt("mail me@host", 12)).toBeUndefined()
    expect(tokenAt("explain [guidance.md:4", 22)).toEqual({
      kind: "reference",
      start: 8,
      typed: "guidance.md:4"
    })
    expect(tokenAt("done [a.md:1:2] now", 19)).toBeUndefined()
  })

  it("offers files, then a Markdown file's blocks as lines and as heading paths", () => {
    const none = () => undefined
    expect(
      suggestionsFor({ kind: "mention", start: 0, typed: "auth" }, files, none).suggestions.map(
        (s) => s.insert
      )
    ).toEqual(["@src/auth.ts "])
    const first = suggestionsFor({ kind: "reference", start: 0, typed: "gu" }, files, none).suggestions
    expect(first.map((s) => s.insert)).toEqual(["[guidance.md:"])
    expect(
      suggestionsFor({ kind: "reference", start: 0, typed: "notes" }, files, none).suggestions[0]?.insert
    ).toBe("[notes.txt:")
    // The file's blocks are asked for, then offered.
    expect(
      suggestionsFor({ kind: "reference", start: 0, typed: "guidance.md:" }, files, none).needsBlocks
    ).toBe("guidance.md")
    const offered = suggestionsFor(
      { kind: "reference", start: 0, typed: "guidance.md:sty" },
      files,
      () => blocks
    ).suggestions
    expect(offered.map((s) => s.insert)).toEqual([
      "[guidance.md:4:5] ",
      "[guidance.md#Tutor guidance/Style] "
    ])
  })

  it("replaces the token with the suggestion and puts the caret after it", () => {
    const text = "Explain [guid and more"
    const token = tokenAt(text, 13)!
    expect(accept(text, token, 13, { insert: "[guidance.md:", label: "" })).toEqual({
      text: "Explain [guidance.md: and more",
      caret: 21
    })
  })
})
