/**
 * `ctxo compile` and `ctxo preview` on the example data in the repository, as a user runs them.
 */

import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { ctxo } from "./ctxo.ts"

const data = fileURLToPath(new URL("../../../fixtures/data", import.meta.url))

describe("ctxo compile", () => {
  it("prints the request for the session's model", async () => {
    const result = await ctxo(["compile", "--data", data, "--session", "code-agent-auth"])
    expect(result.code).toBe(0)
    const request = JSON.parse(result.stdout)
    expect(request.system).toContain("# Code law")
    expect(request.messages.at(-1).role).toBe("user")
  })

  it("prints the OpenAI request with --format and the report with --format json", async () => {
    const openai = JSON.parse(
      (await ctxo(["compile", "--data", data, "-s", "notebook-physics", "-f", "openai", "-q", "What is ħ?"]))
        .stdout
    )
    expect(openai.messages.at(-1)).toEqual({ role: "user", content: "What is ħ?" })
    const full = JSON.parse(
      (await ctxo(["compile", "--data", data, "-s", "notebook-physics", "-f", "json"])).stdout
    )
    expect(Object.keys(full).sort()).toEqual([
      "format",
      "layers",
      "model",
      "prefix",
      "report",
      "request",
      "warnings"
    ])
    expect(full.report.total).toBeLessThanOrEqual(full.report.available)
  })

  it("fails clearly for an unknown session, a bad reference, or a bad format", async () => {
    const session = await ctxo(["compile", "--data", data, "-s", "nope"])
    expect([session.code, session.stderr.trim()]).toEqual([
      1,
      `ctxo: Reference session nope: the data root ${data} has no session nope`
    ])
    const ref = await ctxo([
      "compile",
      "--data",
      data,
      "-s",
      "notebook-physics",
      "-q",
      "see [../profile.md:1:3]"
    ])
    expect(ref.code).toBe(1)
    expect(ref.stderr).toContain("[../profile.md:1:3]: leaves its directory (..)")
    const format = await ctxo(["compile", "--data", data, "-s", "notebook-physics", "-f", "xml"])
    expect(format.code).toBe(1)
  })
})

describe("ctxo preview", () => {
  it("shows the layers with tokens and bars, and what was cut", async () => {
    const result = await ctxo(["preview", "--data", data, "--session", "code-agent-auth"])
    expect(result.code).toBe(0)
    const lines = result.stdout.split("\n")
    expect(lines[0]).toBe(
      "anthropic/claude-sonnet-4-5 (estimate:anthropic (cl100k_base × 1.300), estimate) · anthropic · policy code-agent"
    )
    expect(lines.map((l) => l.split(/\s+/)[0])).toEqual(
      expect.arrayContaining([
        "system_prompt",
        "tools__context",
        "rules__context",
        "checkpoint_messages",
        "query",
        "todo__context"
      ])
    )
    expect(result.stdout).toContain("nothing cut")
  })

  it("has --help", async () => {
    const result = await ctxo(["preview", "--help"])
    expect(result.code).toBe(0)
    expect(result.stdout).toContain("--session")
  })
})
