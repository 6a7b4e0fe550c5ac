import { execFile } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { breakers } from "@ctxo/replay/Breakers"
import { afterAll, describe, expect, it } from "vitest"

const evals = fileURLToPath(new URL("..", import.meta.url))
const fixtures = fileURLToPath(new URL("../../fixtures/sessions", import.meta.url))
const scenarios = fileURLToPath(new URL("../../fixtures/scenarios", import.meta.url))
const temp: Array<string> = []
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  temp.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of temp) rmSync(dir, { recursive: true, force: true })
})

/** `pnpm eval` with its results in a folder of its own (not promptfoo's database, not .out). */
const runEval = (env: Record<string, string>) =>
  new Promise<{ status: number; stdout: string; out: string }>((resolve) => {
    const out = tempDir("ctxo-gate-out-")
    execFile(
      process.execPath,
      ["--import", "tsx/esm", "run.ts"],
      {
        cwd: evals,
        env: { ...process.env, CTXO_EVAL_WRITE: "0", CTXO_EVAL_OUT: out, ...env },
        maxBuffer: 64 * 1024 * 1024
      },
      (error, stdout) =>
        resolve({
          status: error === null ? 0 : typeof error.code === "number" ? error.code : 1,
          stdout,
          out
        })
    )
  })

// The gate catches regressions: each deliberately broken compiler or compactor, swapped in through
// the turn engine's seams, makes `pnpm eval` fail and name the invariant that caught it, in the
// replayed sessions and (for the compiler) through the gateway over HTTP.
describe("pnpm eval as a gate", () => {
  it.each(Object.entries(breakers))(
    "fails on %s, naming the invariant",
    async (name, breaker) => {
      const session = breaker.catches === "keep-turns" ? "long-migration-compacts" : "fix-login-bug"
      const result = await runEval({ CTXO_EVAL_BREAK: name, CTXO_EVAL_SESSIONS: session })
      expect(result.status).toBe(1)
      // One line per violation: session, turn, step, profile, invariant, a short excerpt.
      expect(result.stdout).toMatch(
        new RegExp(
          `^FAIL ${session} turn \\d+( step \\d+)?( \\(retry\\))? \\[gpt-4o\\] ${breaker.catches}: `,
          "m"
        )
      )
      // The gateway runs the same turn engine: a broken compiler or compactor fails the gateway
      // suite too, checked on what the gateway sent the model over HTTP (the compactors on the
      // session that compacts).
      expect(result.stdout).toMatch(
        breaker.catches === "keep-turns"
          ? /^FAIL .* \[gateway-compacting\] /m
          : /^FAIL .* \[gateway-session\] /m
      )
    },
    180_000
  )

  it("passes on the live pieces", async () => {
    const result = await runEval({ CTXO_EVAL_SESSIONS: "fix-login-bug,repeated-input" })
    expect(result.stdout).toContain("ctxo eval: 14 passed, 0 failed")
    expect(result.status).toBe(0)
  }, 180_000)
})

describe("pnpm eval is never vacuously green", () => {
  it("fails when a system prompt grown to ~9k tokens makes every gpt-4 compile a refusal", async () => {
    const dir = tempDir("ctxo-gate-fixtures-")
    const session = JSON.parse(readFileSync(join(fixtures, "fix-login-bug.json"), "utf8")) as {
      systemPrompt: string
      $schema?: string
    }
    // ~14 tokens a sentence: about 9,000 tokens, more than gpt-4's 8,192-token window.
    session.systemPrompt = `${session.systemPrompt}\n\n${"Follow the coding law of the repository and explain every change you make. ".repeat(650)}`
    delete session.$schema
    writeFileSync(join(dir, "fix-login-bug.json"), JSON.stringify(session))
    const result = await runEval({
      CTXO_EVAL_FIXTURES: dir,
      CTXO_EVAL_GATEWAY: "0",
      CTXO_EVAL_GENERATED: "0"
    })
    expect(result.status).toBe(1)
    expect(result.stdout).toMatch(/^FAIL profile gpt-4: no compile in 1 sessions \(\d+ refused/m)
    // The refusals themselves fail too: the fixture declares none of them expected.
    expect(result.stdout).toMatch(/^FAIL fix-login-bug turn 1 \[gpt-4\] [a-z-]+: .*refused/m)
    expect(result.stdout).not.toMatch(/ctxo eval: \d+ passed, 0 failed/)
    // The other profiles still compile it (gpt-4o has 115k tokens available).
    expect(result.stdout).toMatch(/^compiled\s+[1-9]\d*\s+0\s+[1-9]/m)
  }, 180_000)
})

describe("pnpm eval is readable", () => {
  it("prints progress, a table by invariant and profile, one short line per failure, and the details in a file", async () => {
    const result = await runEval({
      CTXO_EVAL_BREAK: "tool-result-dropped",
      CTXO_EVAL_SESSIONS: "fix-login-bug,todo-recap",
      CTXO_EVAL_GATEWAY: "0"
    })
    expect(result.status).toBe(1)
    const lines = result.stdout.split("\n")
    // Progress: one line per session × profile as its replay finishes.
    expect(lines.filter((l) => /^ {2}\[ ?\d+\/8\] /.test(l))).toHaveLength(8)
    // The table: a row per invariant, a column per profile, the failed ones marked.
    const header = lines.find((l) => l.startsWith("invariant "))
    expect(header).toMatch(/gpt-4o\s+gpt-4\s+claude-sonnet-4-5\s+gpt-3.5-turbo/)
    expect(lines.find((l) => l.startsWith("tool-pairs "))).toMatch(/^tool-pairs\s+(\d+ )?✗2\s/)
    expect(lines.some((l) => l.startsWith("order "))).toBe(true)
    expect(lines.find((l) => l.startsWith("compiled "))).toMatch(/^compiled(\s+[1-9]\d*){4}$/)
    // Failures: short lines, the message not repeated.
    const failures = lines.filter((l) => l.startsWith("FAIL "))
    expect(failures.length).toBeGreaterThan(0)
    for (const line of failures) {
      const parts = /^FAIL [\w.-]+ turn \d+( step \d+)?( \(retry\))? \[[\w.-]+\] [a-z-]+: (.*)$/.exec(line)
      expect(parts, line).not.toBeNull()
      expect(parts![3]!.length).toBeLessThan(300)
    }
    // The details, all of them, in a file whose path is printed.
    expect(result.stdout).toMatch(/^details: .*failures\.md$/m)
    expect(existsSync(join(result.out, "failures.md"))).toBe(true)
    const details = JSON.parse(readFileSync(join(result.out, "failures.json"), "utf8")) as {
      failures: ReadonlyArray<{ invariant: string; session: string; profile: string; turn?: number }>
    }
    expect(details.failures.filter((f) => f.invariant === "tool-pairs").length).toBeGreaterThanOrEqual(
      failures.filter((l) => / tool-pairs: /.test(l)).length
    )
  }, 180_000)
})

// The multi-session scenarios (fixtures/scenarios) are played through the real services and
// counted like the sessions; a broken invariant fails the gate with its message and step.
describe("pnpm eval plays the multi-session scenarios", () => {
  it("counts each scenario × profile as a check, in the table and in the report CI sums", async () => {
    const report = join(tempDir("ctxo-gate-report-"), "eval.json")
    const result = await runEval({
      CTXO_EVAL_SESSIONS: "fix-login-bug,aggregate-three-sessions",
      CTXO_EVAL_GATEWAY: "0",
      CTXO_EVAL_REPORT: report
    })
    expect(result.stdout).toContain(
      "ctxo eval: 8 passed, 0 failed (1 sessions × 4 profiles, 1 scenarios × 4 profiles)"
    )
    expect(result.status).toBe(0)
    const lines = result.stdout.split("\n")
    for (const invariant of ["shares-respected", "no-foreign-blocks", "provenance", "steps", "order"])
      expect(lines.find((l) => l.startsWith(`${invariant} `))).toMatch(new RegExp(`^${invariant}(\\s+1){4}$`))
    expect(lines.find((l) => l.startsWith("aggregated "))).toMatch(/^aggregated(\s+4){4}$/)
    expect(JSON.parse(readFileSync(report, "utf8"))).toEqual({ numPassedTests: 8, numFailedTests: 0 })
  }, 180_000)

  it("fails on a scenario whose invariant breaks, naming the scenario, its step and the invariant", async () => {
    const dir = tempDir("ctxo-gate-scenarios-")
    const scenario = JSON.parse(readFileSync(join(scenarios, "promotion-to-l4.json"), "utf8")) as {
      $schema?: string
      steps: Array<{ input?: string; expect?: Record<string, unknown> }>
    }
    // The scenario now calls a stated preference small talk: its promotion to L2 breaks the rule.
    const step = scenario.steps.findIndex((s) => s.input?.includes("metric units") === true)
    scenario.steps[step]!.expect = { important: false }
    delete scenario.$schema
    writeFileSync(join(dir, "promotion-to-l4.json"), JSON.stringify(scenario))
    const report = join(dir, "eval.json")
    const result = await runEval({
      CTXO_EVAL_SCENARIOS: dir,
      CTXO_EVAL_SESSIONS: "promotion-to-l4",
      CTXO_EVAL_GATEWAY: "0",
      CTXO_EVAL_REPORT: report
    })
    expect(result.status).toBe(1)
    expect(result.stdout).toMatch(
      new RegExp(
        `^FAIL promotion-to-l4 step ${step + 1} \\[gpt-4o\\] promotion: turn 2 of default/planner is small talk \\(the scenario says so\\) and was promoted to L2`,
        "m"
      )
    )
    expect(result.stdout).toMatch(/^promotion(\s+0 ✗1){4}$/m)
    expect(JSON.parse(readFileSync(report, "utf8"))).toEqual({ numPassedTests: 0, numFailedTests: 4 })
  }, 180_000)
})
