/**
 * `ctxo aggregate` as a user runs it, on a copy of the example data: the summary (sessions, blocks
 * kept and dropped with their provenance, tokens against the budget), `--json` with the whole
 * answer, an ended session skipped, and refusals in one line with exit code 1.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { ctxo } from "./ctxo.ts"

const example = fileURLToPath(new URL("../../../fixtures/data", import.meta.url))
const temps: Array<string> = []
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true })
})
/** A copy of the example data the command may change (it writes the root's memory.json). */
const dataCopy = () => {
  const dir = mkdtempSync(join(tmpdir(), "ctxo-cli-aggregate-"))
  temps.push(dir)
  cpSync(example, join(dir, "data"), { recursive: true })
  return join(dir, "data")
}
const both = "code-agent-auth,notebook-physics"

describe("ctxo aggregate", () => {
  it("prints the sessions, the blocks kept with where they come from, and the tokens against the budget", async () => {
    const data = dataCopy()
    const run = await ctxo([
      "aggregate",
      "--data",
      data,
      "--sessions",
      both,
      "--query",
      "What does src/auth.ts do?"
    ])
    expect(run.stderr).toBe("")
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(/^openai\/gpt-4o \(o200k_base, exact\) · openai · 2 of 2 sessions$/m)
    expect(run.stdout).toMatch(
      /^request \d+ of 115200 available tokens \(window 128000, output reserve 12800\)/m
    )
    expect(run.stdout).toMatch(/^ {2}code-agent-auth +active +\d+ blocks, its request \d+ tokens$/m)
    expect(run.stdout).toMatch(/^ {2}notebook-physics +active +\d+ blocks/m)
    expect(run.stdout).toMatch(/^blocks: \d+ kept, 0 dropped/m)
    // A kept block names its session, level and source.
    expect(run.stdout).toMatch(
      /^ {2}b-[0-9a-f]{12} +\d+ +\d+\.\d\d {2}code-agent-auth · L1 · recent_history · turn-\d+/m
    )
    expect(run.stdout).toMatch(/notebook-physics · skills · \[profile\.md#/)
  })

  it("prints the whole answer with --json, in the format asked for, within the budget", async () => {
    const data = dataCopy()
    const run = await ctxo([
      "aggregate",
      "--data",
      data,
      "--sessions",
      both,
      "-q",
      "What does src/auth.ts do?",
      "-m",
      "gpt-4",
      "-f",
      "anthropic",
      "--json"
    ])
    expect(run.code).toBe(0)
    const answer = JSON.parse(run.stdout)
    expect(answer.format).toBe("anthropic")
    expect(answer.model).toBe("openai/gpt-4")
    expect(answer.request.system).toContain(readFileSync(join(data, "system-prompt.md"), "utf8").trim())
    expect(answer.request.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "What does src/auth.ts do?" }] }
    ])
    expect(answer.report.total).toBeLessThanOrEqual(answer.report.available)
    expect(answer.report.available).toBe(7372)
    expect(answer.blocks.length).toBeGreaterThan(0)
    for (const b of answer.blocks) {
      expect(["code-agent-auth", "notebook-physics"]).toContain(b.session)
      expect(b.provenance[0]).toMatchObject({ session: b.session, source: b.source })
    }
  })

  it("skips an ended session and says so", async () => {
    const data = dataCopy()
    expect((await ctxo(["sessions", "end", "--data", data, "notebook-physics"])).code).toBe(0)
    const run = await ctxo([
      "aggregate",
      "--data",
      data,
      "--sessions",
      both,
      "--query",
      "What is a wave function?"
    ])
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(/· 1 of 2 sessions$/m)
    expect(run.stdout).toMatch(/^ {2}notebook-physics +skipped \(ended\): Session notebook-physics is ended/m)
    expect(run.stdout).not.toMatch(/notebook-physics · /)
  })

  it("draws on the data root's memory in each session's build, and says where a memory comes from", async () => {
    const data = dataCopy()
    const now = new Date().toISOString()
    writeFileSync(
      join(data, "memory.json"),
      JSON.stringify([
        {
          id: "L3:00000000000000aa",
          level: "L3",
          text: "User: Please remember: the login fix ships in v2.4 on 2026-12-01.\nAssistant: Noted.",
          importance: 0.65,
          reasons: ["aggregated from L2 across sessions"],
          sources: [{ session: "elsewhere", turn: 4 }],
          createdAt: now,
          updatedAt: now
        }
      ])
    )
    const run = await ctxo([
      "aggregate",
      "--data",
      data,
      "--sessions",
      both,
      "--query",
      "When does the login fix ship?",
      "--json"
    ])
    expect(run.code).toBe(0)
    const answer = JSON.parse(run.stdout)
    const memory = answer.blocks.find((b: { level?: string }) => b.level === "L3")
    expect(memory).toMatchObject({
      session: "code-agent-auth",
      sessions: ["code-agent-auth", "notebook-physics"]
    })
    expect(memory.provenance.map((p: { unit: string }) => p.unit)).toEqual([
      "L3:00000000000000aa",
      "L3:00000000000000aa"
    ])
    expect(answer.blocks[0].id).toBe(memory.id)
  })

  it("refuses an unknown session, an empty list or an empty query in one line (exit 1)", async () => {
    const data = dataCopy()
    const ghost = await ctxo(["aggregate", "--data", data, "--sessions", "code-agent-auth,ghost", "-q", "hi"])
    expect([ghost.code, ghost.stderr.trim()]).toEqual([1, "ctxo: No session ghost"])
    const none = await ctxo(["aggregate", "--data", data, "--sessions", ",", "-q", "hi"])
    expect([none.code, none.stderr.trim()]).toEqual([
      1,
      "ctxo: sessions: list at least one session to aggregate"
    ])
    const blank = await ctxo(["aggregate", "--data", data, "--sessions", "code-agent-auth", "-q", " "])
    expect([blank.code, blank.stderr.trim()]).toEqual([
      1,
      "ctxo: query: the question the aggregated context is for cannot be empty"
    ])
  })
})
