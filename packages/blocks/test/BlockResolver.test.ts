import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { syncBlockIds } from "../src/BlockIds.ts"
import { resolveBlock } from "../src/BlockResolver.ts"
import { parseMarkdownBlocks } from "../src/MarkdownBlocks.ts"

const profile = `# 基本信息
25岁

## 教育背景
本科: 软件工程

## 工作经验
3年后端开发

# Learning goals
Distributed systems

# Learning notes
Raft, Paxos
`
const blocks = parseMarkdownBlocks(profile, "profile.md")
const resolved = (ref: string) => Either.getOrThrow(resolveBlock(blocks, ref))
const failed = (ref: string) => Either.flip(resolveBlock(blocks, ref)).pipe(Either.getOrThrow)

describe("resolveBlock", () => {
  it("resolves an exact path with no warning", () => {
    const r = resolved("基本信息/教育背景")
    expect([r.match, r.block.id, r.warning]).toEqual(["exact", "基本信息/教育背景", undefined])
  })

  it("resolves a differently cased or spaced path and says so", () => {
    const r = resolved("learning   GOALS")
    expect([r.match, r.block.id]).toEqual(["normalized", "Learning goals"])
    expect(r.warning).toContain('using "Learning goals"')
  })

  it("resolves a bare heading that only one block has", () => {
    const r = resolved("工作经验")
    expect([r.match, r.block.id]).toEqual(["normalized", "基本信息/工作经验"])
  })

  it("falls back to the closest heading when a heading was renamed, with a warning", () => {
    const r = resolved("基本信息/教育经历")
    expect([r.match, r.block.id]).toEqual(["fuzzy", "基本信息/教育背景"])
    expect(r.warning).toMatch(/not found in profile\.md; using the closest heading "基本信息\/教育背景"/)
    expect(resolved("Learning goal").block.id).toBe("Learning goals")
  })

  it("refuses to guess between two equally close headings", () => {
    const error = failed("Learning")
    expect(error.reason).toBe("several headings match equally well")
    expect(error.suggestions).toEqual(expect.arrayContaining(["Learning goals", "Learning notes"]))
  })

  it("names the file, the reference and close ids when nothing matches", () => {
    const error = failed("Kubernetes")
    expect(error._tag).toBe("BlockNotFound")
    expect(error.message).toContain('Block "Kubernetes" not found in profile.md')
  })

  it("resolves short ids, old paths of renamed blocks, and explains deleted ids", () => {
    const v1 = syncBlockIds(blocks, undefined, "profile.md")
    const renamedText = profile
      .replace("## 教育背景", "## Education")
      .replace("# Learning notes\nRaft, Paxos\n", "")
    const v2 = syncBlockIds(parseMarkdownBlocks(renamedText, "profile.md"), v1.sidecar, "profile.md")
    const education = v2.blocks[0]!.children[0]!
    expect(education.id).toBe("基本信息/Education")

    const byShortId = Either.getOrThrow(resolveBlock(v2.blocks, `^${education.shortId}`))
    expect([byShortId.match, byShortId.block.id]).toEqual(["exact", "基本信息/Education"])

    const byOldPath = Either.getOrThrow(resolveBlock(v2.blocks, "基本信息/教育背景", { sidecar: v2.sidecar }))
    expect([byOldPath.match, byOldPath.block.id]).toEqual(["renamed", "基本信息/Education"])

    const notesId = v1.blocks.find((b) => b.id === "Learning notes")!.shortId
    const deleted = Either.flip(resolveBlock(v2.blocks, `^${notesId}`, { sidecar: v2.sidecar })).pipe(
      Either.getOrThrow
    )
    expect(deleted.reason).toBe("the block with this id was deleted")
  })

  it("resolves short ids in freshly parsed blocks when given the sidecar (the file read again, renamed)", () => {
    const v1 = syncBlockIds(blocks, undefined, "profile.md")
    const goals = v1.blocks.find((b) => b.id === "Learning goals")!
    // The file as a reader gets it: parsed anew, no short ids, a heading renamed since the sidecar.
    const renamed = parseMarkdownBlocks(profile.replace("# Learning goals", "# Goals"), "profile.md")
    const withoutSidecar = Either.flip(resolveBlock(renamed, `^${goals.shortId}`)).pipe(Either.getOrThrow)
    expect(withoutSidecar.reason).toBe("no block has this short id")
    const found = Either.getOrThrow(resolveBlock(renamed, `^${goals.shortId}`, { sidecar: v1.sidecar }))
    expect([found.match, found.block.id, found.block.content.trim()]).toEqual([
      "exact",
      "Goals",
      "Distributed systems"
    ])
    // An id the sidecar never handed out is unknown, though syncing would give it to a new heading.
    const added = parseMarkdownBlocks(`${profile}\n# Brand new\ntext\n`, "profile.md")
    const next = `^b${v1.sidecar.next.toString(36)}`
    const unknown = Either.flip(resolveBlock(added, next, { sidecar: v1.sidecar })).pipe(Either.getOrThrow)
    expect(unknown.reason).toBe("no block has this short id")
  })
})
