import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { flattenBlocks } from "../src/Block.ts"
import type { BlockIdSidecar } from "../src/BlockIds.ts"
import { decodeSidecar, encodeSidecar, sidecarPath, syncBlockIds } from "../src/BlockIds.ts"
import { parseMarkdownBlocks } from "../src/MarkdownBlocks.ts"

const v1Text = `Intro.

# 基本信息
25岁

## 教育背景
本科: 软件工程

## 工作经验
3年后端开发

# 学习目标
分布式系统
`

const sync = (text: string, previous?: BlockIdSidecar) =>
  syncBlockIds(parseMarkdownBlocks(text, "profile.md"), previous, "profile.md")
const idsByPath = (result: ReturnType<typeof sync>) =>
  Object.fromEntries(flattenBlocks(result.blocks).map((b) => [b.id, b.shortId]))

describe("syncBlockIds", () => {
  const v1 = sync(v1Text)

  it("gives every block a short id and writes them in document order", () => {
    expect(idsByPath(v1)).toEqual({
      _preamble: "b1",
      基本信息: "b2",
      "基本信息/教育背景": "b3",
      "基本信息/工作经验": "b4",
      学习目标: "b5"
    })
    expect(v1.sidecar.blocks.map((e) => e.path)).toEqual(Object.keys(idsByPath(v1)))
    expect(v1.changed).toBe(true)
    expect(sidecarPath("docs/profile.md")).toBe("docs/profile.md.blocks.json")
  })

  it("changes nothing when the file did not change", () => {
    const again = sync(v1Text, v1.sidecar)
    expect(again.changed).toBe(false)
    expect(idsByPath(again)).toEqual(idsByPath(v1))
  })

  it("keeps the id of a renamed heading, and of its children", () => {
    const v2 = sync(v1Text.replace("# 基本信息", "# 个人信息").replace("## 教育背景", "## 学历"), v1.sidecar)
    expect(idsByPath(v2)).toEqual({
      _preamble: "b1",
      个人信息: "b2",
      "个人信息/学历": "b3",
      "个人信息/工作经验": "b4",
      学习目标: "b5"
    })
    expect(v2.changes.renamed).toEqual([
      { id: "b2", from: "基本信息", to: "个人信息" },
      { id: "b3", from: "基本信息/教育背景", to: "个人信息/学历" },
      { id: "b4", from: "基本信息/工作经验", to: "个人信息/工作经验" }
    ])
    expect(v2.sidecar.blocks.find((e) => e.id === "b3")!.aliases).toEqual(["基本信息/教育背景"])
  })

  it("keeps the id of a heading renamed and edited a little", () => {
    const v2 = sync(
      v1Text.replace("## 工作经验\n3年后端开发", "## 工作经历\n3年后端开发，1年前端"),
      v1.sidecar
    )
    expect(idsByPath(v2)["基本信息/工作经历"]).toBe("b4")
  })

  it("keeps the id of a section moved under another parent", () => {
    const moved = v1Text.replace("## 工作经验\n3年后端开发\n\n", "") + "\n## 工作经验\n3年后端开发\n"
    const v2 = sync(moved, v1.sidecar)
    expect(idsByPath(v2)["学习目标/工作经验"]).toBe("b4")
  })

  it("never hands out the id of a deleted heading again", () => {
    const withoutWork = v1Text.replace("## 工作经验\n3年后端开发\n\n", "")
    const v2 = sync(withoutWork, v1.sidecar)
    expect(v2.changes.removed).toEqual([{ id: "b4", path: "基本信息/工作经验" }])
    expect(v2.sidecar.retired).toEqual(["b4"])
    // The heading comes back later, next to a new one: both get fresh ids.
    const v3 = sync(
      withoutWork.replace("# 学习目标", "## 工作经验\n3年后端开发\n\n## 新的一节\n全新内容\n\n# 学习目标"),
      v2.sidecar
    )
    const ids = idsByPath(v3)
    expect([ids["基本信息/工作经验"], ids["基本信息/新的一节"]]).toEqual(["b6", "b7"])
    expect(Object.values(ids)).not.toContain("b4")
  })

  it("round-trips through its JSON text and rejects a malformed sidecar with its file name", () => {
    const text = encodeSidecar(v1.sidecar)
    expect(Either.getOrThrow(decodeSidecar(text, "profile.md.blocks.json"))).toEqual(v1.sidecar)
    const bad = Either.flip(decodeSidecar('{"format":"other"}', "profile.md.blocks.json")).pipe(
      Either.getOrThrow
    )
    expect(bad.message).toMatch(
      /^Invalid block id sidecar profile\.md\.blocks\.json: format: expected [^\n]+$/
    )
    expect(bad.message.length).toBeLessThanOrEqual(300)
    const notJson = Either.flip(decodeSidecar("{", "profile.md.blocks.json")).pipe(Either.getOrThrow)
    expect(notJson._tag).toBe("InvalidSidecar")
  })
})
