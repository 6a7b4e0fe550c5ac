/**
 * `ctxo count` and `ctxo models` as a user runs them: the bundled CLI in a real process.
 */

import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { get_encoding } from "tiktoken"
import { ctxo } from "./ctxo.ts"

const dir = mkdtempSync(join(tmpdir(), "ctxo-count-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const text = "基本信息：25岁，计算机专业研究生。<|endoftext|> is plain text in a file.\n".repeat(20)
const file = join(dir, "notes.md")
writeFileSync(file, text)

describe("ctxo count", () => {
  it("counts exactly like tiktoken for an OpenAI model, special-token strings included", async () => {
    const encoding = get_encoding("o200k_base")
    const expected = encoding.encode_ordinary(text).length
    encoding.free()
    const result = await ctxo(["count", file, "--model", "gpt-4o", "--json"])
    expect(result.code).toBe(0)
    expect(JSON.parse(result.stdout)).toEqual({
      model: "openai/gpt-4o",
      tokenizer: "o200k_base",
      method: "exact",
      files: [{ file, tokens: expected, share: expected / 128_000 }]
    })
  })

  it("marks estimates for models without a local tokenizer", async () => {
    const result = await ctxo(["count", file, "-m", "claude-sonnet-4-5"])
    expect(result.stdout).toContain("anthropic/claude-sonnet-4-5: estimate:anthropic (cl100k_base × 1.300)")
    expect(result.stdout).toMatch(/^\s+~\d+\s+[\d.]+%\s+.*notes\.md$/m)
  })

  it("names an unknown model and suggests close ones", async () => {
    const result = await ctxo(["count", file, "-m", "gpt-4oo"])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain('ctxo: Unknown model "gpt-4oo"')
    expect(result.stderr).toContain("openai/gpt-4o")
  })
})

describe("ctxo models", () => {
  it("lists the registry with sources, and applies a models file and CTXO_MODELS", async () => {
    const models = join(dir, "models.json")
    writeFileSync(
      models,
      JSON.stringify({
        models: {
          "acme/tiny-8k": { contextWindow: 8000, tokenizer: { kind: "exact", encoding: "cl100k_base" } }
        }
      })
    )
    const result = await ctxo(["models", "--json", "--models", models], {
      CTXO_MODELS: JSON.stringify({ models: { "openai/gpt-4o": { contextWindow: 64000 } } })
    })
    expect(result.code).toBe(0)
    const list = JSON.parse(result.stdout) as Array<{
      id: string
      contextWindow: number
      sources: Record<string, string>
    }>
    expect(list.find((m) => m.id === "acme/tiny-8k")).toMatchObject({
      contextWindow: 8000,
      sources: { contextWindow: models }
    })
    expect(list.find((m) => m.id === "openai/gpt-4o")).toMatchObject({
      contextWindow: 64000,
      sources: { contextWindow: "CTXO_MODELS" }
    })
    expect(list.find((m) => m.id === "openai/gpt-5")).toMatchObject({ contextWindow: 400_000 })
  })

  it("reports an invalid models file by name", async () => {
    const bad = join(dir, "bad-models.json")
    writeFileSync(bad, '{"models": {"openai/gpt-4o": {"maxInput": 900000}}}')
    const result = await ctxo(["models", "--models", bad])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain(
      `ctxo: Invalid model configuration in ${bad}: models["openai/gpt-4o"]: maxInput 900000 exceeds contextWindow 128000`
    )
  })
})
