/**
 * `pnpm eval`: writes one promptfoo test per recorded session (fixtures/sessions), runs the suite
 * offline under tsx, prints the failures, and exits non-zero on any failed assertion.
 * `pnpm eval:live` runs live.yaml against real providers (skipped when no API key is set).
 *
 * CTXO_EVAL_SESSIONS=a,b limits the sessions (the gate test uses it).
 */
import { spawnSync } from "node:child_process"
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"

const here = import.meta.dirname
const out = join(here, ".out")
const fixtures = resolve(here, "../fixtures/sessions")
const live = process.argv.includes("--live")

if (live && process.env.OPENAI_API_KEY === undefined && process.env.ANTHROPIC_API_KEY === undefined) {
  console.log("pnpm eval:live skipped: set OPENAI_API_KEY and/or ANTHROPIC_API_KEY to run the live suite.")
  process.exit(0)
}

const only = process.env.CTXO_EVAL_SESSIONS?.split(",").map((s) => s.trim())
const sessions = readdirSync(fixtures)
  .filter((f) => f.endsWith(".json"))
  .sort()
  .filter((f) => only === undefined || only.includes(f.replace(/\.json$/, "")))
rmSync(out, { recursive: true, force: true })
mkdirSync(out, { recursive: true })
writeFileSync(
  join(out, "tests.json"),
  JSON.stringify(
    sessions.map((f) => {
      const s = JSON.parse(readFileSync(join(fixtures, f), "utf8")) as { id: string; description: string }
      return { description: `${s.id}: ${s.description}`, vars: { recording: `fixtures/sessions/${f}` } }
    }),
    null,
    2
  )
)

// The package hides its package.json from `exports`: find its folder in node_modules.
const promptfoo = join(here, "node_modules", "promptfoo", "dist", "src", "entrypoint.js")
const result = spawnSync(
  process.execPath,
  [
    "--import",
    "tsx/esm",
    promptfoo,
    "eval",
    "-c",
    live ? "live.yaml" : "promptfooconfig.yaml",
    "--no-cache",
    "--no-write",
    "--no-progress-bar",
    "--no-share",
    "--no-table",
    "-j",
    process.env.CTXO_EVAL_CONCURRENCY ?? "4",
    "-o",
    join(out, "results.json")
  ],
  {
    cwd: here,
    stdio: ["ignore", "pipe", "pipe"],
    encoding: "utf8",
    env: {
      ...process.env,
      PROMPTFOO_CONFIG_DIR: join(out, "promptfoo"),
      PROMPTFOO_DISABLE_TELEMETRY: "1",
      PROMPTFOO_DISABLE_UPDATE: "1",
      PROMPTFOO_DISABLE_RUNTIME_WARNINGS: "1",
      PROMPTFOO_FAILED_TEST_EXIT_CODE: "1"
    }
  }
)

interface Row {
  readonly success: boolean
  readonly provider?: { readonly label?: string; readonly id?: string }
  readonly vars?: { readonly recording?: string }
  readonly error?: string
  readonly gradingResult?: { readonly componentResults?: ReadonlyArray<{ pass: boolean; reason: string }> }
}
let rows: ReadonlyArray<Row> = []
try {
  rows = (
    JSON.parse(readFileSync(join(out, "results.json"), "utf8")) as {
      results: { results: ReadonlyArray<Row> }
    }
  ).results.results
} catch {
  process.stdout.write(result.stdout ?? "")
  process.stderr.write(result.stderr ?? "")
  console.error("ctxo eval: promptfoo wrote no results")
  process.exit(result.status === 0 ? 1 : (result.status ?? 1))
}
const failed = rows.filter((r) => !r.success)
for (const r of failed) {
  const reasons = r.gradingResult?.componentResults?.filter((c) => !c.pass).map((c) => c.reason) ?? []
  console.log(
    `FAIL ${r.vars?.recording} [${r.provider?.label ?? r.provider?.id}]: ${reasons.join(" | ") || r.error}`
  )
}
console.log(
  `ctxo eval: ${rows.length - failed.length} passed, ${failed.length} failed (${sessions.length} sessions × ${rows.length / Math.max(sessions.length, 1)} profiles); results in evals/.out/results.json`
)
process.exit(failed.length > 0 || result.status !== 0 ? 1 : 0)
