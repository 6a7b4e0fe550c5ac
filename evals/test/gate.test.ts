import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { breakers } from "@ctxo/replay/Breakers"
import { describe, expect, it } from "vitest"

// The gate catches regressions: each deliberately broken compiler or compactor, swapped in through
// its layer, makes `pnpm eval` fail and name the invariant that caught it.
const runEval = (env: Record<string, string>) =>
  new Promise<{ status: number; stdout: string }>((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx/esm", "run.ts"],
      {
        cwd: fileURLToPath(new URL("..", import.meta.url)),
        env: { ...process.env, ...env },
        maxBuffer: 64 * 1024 * 1024
      },
      (error, stdout) =>
        resolve({ status: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout })
    )
  })

describe("pnpm eval as a gate", () => {
  it.each(Object.entries(breakers))(
    "fails on %s, naming the invariant",
    async (name, breaker) => {
      const session = breaker.catches === "keep-turns" ? "long-migration-compacts" : "fix-login-bug"
      const result = await runEval({ CTXO_EVAL_BREAK: name, CTXO_EVAL_SESSIONS: session })
      expect(result.status).toBe(1)
      expect(result.stdout).toMatch(
        new RegExp(
          `FAIL fixtures/sessions/${session}\\.json \\[gpt-4o\\]: .*${breaker.catches}: \\d+ violation`
        )
      )
    },
    120_000
  )

  it("passes on the live pieces", async () => {
    const result = await runEval({ CTXO_EVAL_SESSIONS: "fix-login-bug,repeated-input" })
    expect(result.stdout).toContain("ctxo eval: 8 passed, 0 failed")
    expect(result.status).toBe(0)
  }, 120_000)
})
