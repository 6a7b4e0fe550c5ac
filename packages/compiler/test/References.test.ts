import { cleanPath } from "@ctxo/store/Paths"
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { parseInlineReferences, parseReference, resolveReference, sandboxPath } from "../src/References.ts"

const guidance = Array.from({ length: 40 }, (_, i) => `guidance line ${i + 1}`).join("\n")
const truth = "# 量子力学\n导言\n\n## 薛定谔方程\niħ∂ψ/∂t = Ĥψ\n\n## 不确定性原理\nΔxΔp ≥ ħ/2\n"

describe("references", () => {
  it("finds inline line and block references in a query, in order, once each", () => {
    expect(
      parseInlineReferences(
        "这段是什么意思 [guidance.md:12:30] 和 [ground-truth.md#量子力学/薛定谔方程]，再看 [guidance.md:12:30]"
      )
    ).toEqual([
      { _tag: "lines", raw: "[guidance.md:12:30]", path: "guidance.md", startLine: 12, endLine: 30 },
      {
        _tag: "block",
        raw: "[ground-truth.md#量子力学/薛定谔方程]",
        path: "ground-truth.md",
        block: "量子力学/薛定谔方程"
      }
    ])
    expect(parseInlineReferences("a [link](http://x) and [note] and [x:1]")).toEqual([])
  })

  it("resolves line ranges and blocks, blocks with their children", () => {
    const lines = Either.getOrThrow(
      resolveReference(
        Either.getOrThrow(parseReference({ path: "guidance.md", startLine: 12, endLine: 14 })),
        guidance
      )
    )
    expect(lines.text).toBe("guidance line 12\nguidance line 13\nguidance line 14")
    const block = Either.getOrThrow(
      resolveReference(Either.getOrThrow(parseReference("[ground-truth.md#薛定谔方程]")), truth)
    )
    expect([block.block, block.startLine, block.endLine, block.text]).toEqual([
      "量子力学/薛定谔方程",
      4,
      6,
      "## 薛定谔方程\niħ∂ψ/∂t = Ĥψ"
    ])
    expect(block.warning).toContain("is a heading, not a full id")
  })

  it("names the reference when a file, block or range is missing", () => {
    const fail = (ref: string, content: string | undefined) =>
      Either.flip(resolveReference(Either.getOrThrow(parseReference(ref)), content)).pipe(Either.getOrThrow)
    expect(fail("[guidance.md:38:45]", guidance).message).toBe(
      "Reference [guidance.md:38:45]: lines 38-45 are outside guidance.md (40 lines)"
    )
    expect(fail("[guidance.md:9:3]", guidance).kind).toBe("out-of-range")
    expect(fail("[missing.md:1:2]", undefined).message).toBe(
      "Reference [missing.md:1:2]: missing.md does not exist"
    )
    const block = fail("[ground-truth.md#Kubernetes]", truth)
    expect([block.kind, block.message]).toEqual([
      "missing-block",
      expect.stringContaining('Block "Kubernetes" not found in ground-truth.md')
    ])
    expect(Either.isLeft(parseReference("not a reference"))).toBe(true)
  })

  it.each([
    ["../secret.md", "leaves its directory"],
    ["notes/../../x.md", "leaves its directory"],
    ["/etc/passwd", "absolute paths"],
    ["C:/Windows/win.ini", "absolute paths"],
    ["~/notes.md", "home directory"],
    ["a\u0000b.md", "NUL"],
    ["%2e%2e/secret.md", "percent-encoded"],
    ["..%2fsecret.md", "percent-encoded"],
    ["notes\\..\\x.md", "use / to separate directories"],
    ["", "empty"]
  ])("refuses %j outside the sandbox", (path, reason) => {
    const error = Either.flip(sandboxPath(path)).pipe(Either.getOrThrow)
    expect(error.kind).toBe("outside-sandbox")
    expect(error.reason).toContain(reason)
    // One path rule: the store's, with its reason.
    expect(error.reason).toBe(Either.flip(cleanPath(path)).pipe(Either.getOrThrow).reason)
  })

  it("normalizes harmless paths", () => {
    expect(sandboxPath("./notes//a.md")).toEqual(Either.right("notes/a.md"))
    expect(sandboxPath("..notes/a..md")).toEqual(Either.right("..notes/a..md"))
  })
})
