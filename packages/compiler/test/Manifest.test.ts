import { readFileSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { manifestJsonSchema, parseManifest } from "../src/Manifest.ts"

describe("manifest", () => {
  it("reads seed 000's context-config.json and fills the defaults", () => {
    const manifest = Either.getOrThrow(
      parseManifest(
        JSON.stringify({
          systemPrompt: [
            { type: "global", file: "system-prompt.md" },
            { type: "session", file: "session-prompt.md" }
          ],
          profileBlocks: ["学习目标", "已有基础"],
          chatHistory: { source: "messages.json", strategy: "full" },
          query: "这段是什么意思 [guidance.md:12:30]",
          references: [
            { path: "guidance.md", startLine: 12, endLine: 30 },
            { path: "ground-truth.md", block: "薛定谔方程" }
          ]
        })
      )
    )
    expect(manifest.policy).toBe("notebook")
    expect(manifest.profileBlocks).toEqual(["学习目标", "已有基础"])
    expect(manifest.process).toEqual({ role: "agent", knowledge: false })
    expect(manifest.references).toHaveLength(2)
  })

  it("names the field of an invalid manifest", () => {
    const error = (value: unknown) =>
      Either.flip(parseManifest(JSON.stringify(value), "s1/context-config.json")).pipe(Either.getOrThrow)
    expect(error({ policy: "fancy" }).field).toBe("policy")
    expect(error({ references: [{ path: "a.md", startLine: 0, endLine: 3 }] }).field).toMatch(
      /^references\[0\]\.startLine$/
    )
    expect(error({ chatHistory: { strategy: "all" } }).field).toBe("chatHistory.strategy")
    const typo = error({ profileBlock: ["x"] })
    expect(typo.field).toBe("profileBlock")
    expect(typo.message).toMatch(/^Invalid manifest s1\/context-config\.json: profileBlock: /)
    const notJson = Either.flip(parseManifest("{", "c.json")).pipe(Either.getOrThrow)
    expect(notJson._tag).toBe("InvalidManifest")
  })

  it("publishes its JSON Schema (manifest.schema.json is up to date)", () => {
    const published = JSON.parse(readFileSync(new URL("../manifest.schema.json", import.meta.url), "utf8"))
    expect(published).toEqual(JSON.parse(JSON.stringify(manifestJsonSchema())))
    expect(Object.keys(published.properties)).toEqual(
      expect.arrayContaining([
        "policy",
        "model",
        "systemPrompt",
        "profileBlocks",
        "chatHistory",
        "query",
        "references",
        "process",
        "budget"
      ])
    )
  })
})
