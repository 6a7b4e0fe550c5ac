import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { ctxo } from "./ctxo.ts"

const sessions = fileURLToPath(new URL("../../../fixtures/sessions", import.meta.url))
const temps: Array<string> = []
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  temps.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true })
})

describe("ctxo replay", () => {
  it("replays sessions for the chosen profiles, dumps every compile and writes both reports", async () => {
    const out = tempDir("ctxo-replay-")
    const run = await ctxo([
      "replay",
      join(sessions, "crash-and-retry.json"),
      join(sessions, "tree-context.json"),
      "--profiles",
      "gpt-4o,claude-sonnet-4-5",
      "--dump",
      join(out, "dump"),
      "--report",
      join(out, "report.json"),
      // Two worker threads: each runs the bundle itself as the replay worker.
      "--concurrency",
      "2"
    ])
    expect(run.stderr).toBe("")
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(
      /^2 sessions × 2 profiles: \d+ compiles, 0 compactions, 0 refusals, 0 violations in/m
    )
    const dumped = readdirSync(join(out, "dump", "crash-and-retry", "gpt-4o")).sort()
    expect(dumped).toContain("turn-2-retry.json")
    const turn = JSON.parse(
      readFileSync(join(out, "dump", "crash-and-retry", "gpt-4o", "turn-1.json"), "utf8")
    )
    expect(Object.keys(turn)).toEqual(["request", "layers", "tokens", "window", "reserve"])
    expect(turn.layers[0]).toEqual({ name: "system_prompt", from: 0, to: 0 })
    expect(turn.window).toBe(128_000)
    const report = JSON.parse(readFileSync(join(out, "report.json"), "utf8"))
    expect(report.runs).toHaveLength(4)
    expect(readFileSync(join(out, "report.md"), "utf8")).toContain("| crash-and-retry | claude-sonnet-4-5 |")
  })

  it("exits 1 naming the file and field of an invalid session", async () => {
    const dir = tempDir("ctxo-replay-bad-")
    writeFileSync(
      join(dir, "bad.json"),
      JSON.stringify({ format: "ctxo.session/v1", id: "bad", policy: "code-agent" })
    )
    const run = await ctxo(["replay", dir])
    expect(run.code).toBe(1)
    expect(run.stderr).toMatch(/^ctxo: Invalid session .*bad\.json: description: is missing/m)
  })
})
