/**
 * `ctxo run` as a user runs it, on a copy of the example data and the local deterministic model
 * (no upstream configured): the transitions of a planned run, the final answer, the state as JSON,
 * the answer kept in the session's history, a retry by key that asks nothing again, and a paused
 * session refused with exit code 1.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
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
const dataCopy = () => {
  const dir = mkdtempSync(join(tmpdir(), "ctxo-cli-run-"))
  temps.push(dir)
  cpSync(example, join(dir, "data"), { recursive: true })
  return join(dir, "data")
}
// The local model, whatever the machine's environment says.
const offline = {
  CTXO_UPSTREAM_API_KEY: undefined,
  CTXO_UPSTREAM_BASE_URL: undefined,
  CTXO_UPSTREAMS: undefined
}
const GOAL = "List what the fix changes, then draft the release note"

describe("ctxo run", () => {
  it("plans, runs each step by a specialist, reflects and prints the final answer; --json prints the state", async () => {
    const data = dataCopy()
    const run = await ctxo(["run", "--data", data, "-s", "code-agent-auth", "--key", "k1", GOAL], offline)
    expect(run.code, run.stderr).toBe(0)
    const lines = run.stdout.split("\n")
    expect(lines[0]).toMatch(/^run r-[0-9a-f]{16} of session code-agent-auth$/)
    expect(lines.filter((l) => l.startsWith("> "))).toEqual([
      "> analyze",
      "> judge",
      "> plan",
      "> execute",
      "> collect",
      "> feedback",
      "> reflect",
      "> final-answer",
      "> done"
    ])
    expect(lines).toContain("    s2: draft the release note (after s1)")
    expect(lines.some((l) => /^ {2}s2 done \(\d+ tokens of context\): /.test(l))).toBe(true)
    expect(run.stdout).toContain("(local model, no API key set) From 2 results:")

    const history = readFileSync(join(data, "code-agent-auth", "messages.json"), "utf8")
    expect(history.split(GOAL).length - 1).toBe(1)

    // The same key: the finished run, resumed from history; --json prints its state.
    const again = await ctxo(
      ["run", "--data", data, "-s", "code-agent-auth", "--key", "k1", "--json", GOAL],
      offline
    )
    expect(again.code, again.stderr).toBe(0)
    const state = JSON.parse(again.stdout)
    expect(state).toMatchObject({
      format: "ctxo.run/v1",
      goal: GOAL,
      phase: "done",
      isCompleted: true,
      reflectionCount: 1
    })
    expect(Object.keys(state.specialistResults)).toEqual(["s1", "s2"])
    expect(readFileSync(join(data, "code-agent-auth", "messages.json"), "utf8")).toBe(history)
  })

  it("refuses a paused session with exit code 1 and one sentence", async () => {
    const data = dataCopy()
    expect((await ctxo(["sessions", "pause", "--data", data, "code-agent-auth"], offline)).code).toBe(0)
    const run = await ctxo(["run", "--data", data, "-s", "code-agent-auth", "Anything"], offline)
    expect(run.code).toBe(1)
    expect(run.stderr).toMatch(/code-agent-auth.*paused/)
  })
})
