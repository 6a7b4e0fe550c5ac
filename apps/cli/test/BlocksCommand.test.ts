/**
 * `ctxo blocks` as a user runs it: the bundled CLI (built by the global setup) in a real process, on
 * real files in a temporary directory.
 */

import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { ctxo as run } from "./ctxo.ts"

const ctxo = (...args: Array<string>) => run(args)

const profile = `# 基本信息
25岁，计算机专业研究生

## 教育背景
本科: 软件工程

# 学习目标
深入理解分布式系统原理
`

const temps: Array<string> = []
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true })
})
const workspace = () => {
  const dir = mkdtempSync(join(tmpdir(), "ctxo-cli-"))
  temps.push(dir)
  const file = join(dir, "profile.md")
  writeFileSync(file, profile)
  return { dir, file }
}

describe("ctxo blocks", () => {
  it("prints the block tree with ids and line ranges", async () => {
    const { file } = workspace()
    const result = await ctxo("blocks", file)
    expect(result.code).toBe(0)
    expect(result.stdout.trimEnd().split("\n").slice(1)).toEqual([
      "├─ 基本信息  L1-6",
      "│  └─ 基本信息/教育背景  L4-6",
      "└─ 学习目标  L7-8"
    ])
    expect(result.stdout).toContain("3 blocks, 8 lines")
  })

  it("prints one block's text, and says when it used a close match", async () => {
    const { file } = workspace()
    const exact = await ctxo("blocks", file, "--get", "基本信息/教育背景")
    expect([exact.code, exact.stdout, exact.stderr]).toEqual([0, "## 教育背景\n本科: 软件工程\n", ""])
    const fuzzy = await ctxo("blocks", file, "--get", "学习目的")
    expect(fuzzy.stdout).toBe("# 学习目标\n深入理解分布式系统原理\n")
    expect(fuzzy.stderr).toContain('warning: "学习目的" not found')
  })

  it("keeps short ids in a sidecar across a rename", async () => {
    const { dir, file } = workspace()
    const first = await ctxo("blocks", file, "--sync-ids")
    expect(first.code).toBe(0)
    expect(first.stdout).toContain("基本信息/教育背景  L4-6  ^b2")
    const sidecar = JSON.parse(readFileSync(`${file}.blocks.json`, "utf8"))
    expect(sidecar.blocks.map((b: { id: string }) => b.id)).toEqual(["b1", "b2", "b3"])

    writeFileSync(file, profile.replace("## 教育背景", "## 学历"))
    const second = await ctxo("blocks", file, "--sync-ids")
    expect(second.stdout).toContain("基本信息/学历  L4-6  ^b2")
    expect(second.stderr).toContain("^b2: 基本信息/教育背景 -> 基本信息/学历")
    const byId = await ctxo("blocks", file, "--get", "^b2")
    expect(byId.stdout).toBe("## 学历\n本科: 软件工程\n")
    const byOldPath = await ctxo("blocks", file, "--get", "基本信息/教育背景")
    expect(byOldPath.stdout).toBe("## 学历\n本科: 软件工程\n")
    expect(byOldPath.stderr).toContain("was renamed")
    // The atomic write leaves no temporary file behind.
    expect(readdirSync(dir).sort()).toEqual(["profile.md", "profile.md.blocks.json"])
  })

  it("lists JSON keys and names the file, line and column of invalid JSON", async () => {
    const { dir } = workspace()
    const good = join(dir, "config.json")
    writeFileSync(good, '{\n  "chatHistory": { "maxTurns": 10 }\n}\n')
    expect((await ctxo("blocks", good)).stdout).toContain("└─ chatHistory/maxTurns  L2")
    const bad = join(dir, "bad.json")
    writeFileSync(bad, '{\n  "a": 1,\n}\n')
    const result = await ctxo("blocks", bad)
    expect(result.code).toBe(1)
    expect(result.stderr).toBe(`ctxo: Invalid JSON in ${bad} at line 3, column 1: PropertyNameExpected\n`)
  })

  it("fails with a clear message for a missing file or block", async () => {
    const { dir, file } = workspace()
    const missing = await ctxo("blocks", join(dir, "nope.md"))
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain("nope.md' must exist")
    const noBlock = await ctxo("blocks", file, "--get", "Kubernetes")
    expect(noBlock.code).toBe(1)
    expect(noBlock.stderr).toContain(`ctxo: Block "Kubernetes" not found in ${file}`)
  })
})
