/**
 * `pnpm eval`: writes one promptfoo test per recorded session (fixtures/sessions), runs the suite
 * offline under tsx, then the gateway suite (promptfoo's openai provider against a gateway this
 * script starts on the example data with the local model), prints the failures, and exits
 * non-zero on any failed assertion. `pnpm eval:live` runs live.yaml against real providers
 * (skipped when no API key is set).
 *
 * CTXO_EVAL_SESSIONS=a,b limits the sessions (and skips the gateway suite; the gate test uses it).
 */
import { spawn } from "node:child_process"
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
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

interface Row {
  readonly success: boolean
  readonly provider?: { readonly label?: string; readonly id?: string }
  readonly vars?: { readonly recording?: string; readonly question?: string }
  readonly error?: string
  readonly gradingResult?: { readonly componentResults?: ReadonlyArray<{ pass: boolean; reason: string }> }
}

// The package hides its package.json from `exports`: find its folder in node_modules.
const promptfoo = join(here, "node_modules", "promptfoo", "dist", "src", "entrypoint.js")

/** Runs one promptfoo config; its rows, or undefined when it wrote no results. */
const runSuite = (config: string, name: string, env: Record<string, string> = {}) =>
  new Promise<{ status: number; rows?: ReadonlyArray<Row>; output: string }>((done) => {
    const results = join(out, `${name}.json`)
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx/esm",
        promptfoo,
        "eval",
        "-c",
        config,
        "--no-cache",
        "--no-write",
        "--no-progress-bar",
        "--no-share",
        "--no-table",
        "-j",
        process.env.CTXO_EVAL_CONCURRENCY ?? "4",
        "-o",
        results
      ],
      {
        cwd: here,
        stdio: ["ignore", "pipe", "pipe"],
        env: {
          ...process.env,
          ...env,
          PROMPTFOO_CONFIG_DIR: join(out, "promptfoo"),
          PROMPTFOO_DISABLE_TELEMETRY: "1",
          PROMPTFOO_DISABLE_UPDATE: "1",
          PROMPTFOO_DISABLE_RUNTIME_WARNINGS: "1",
          PROMPTFOO_FAILED_TEST_EXIT_CODE: "1"
        }
      }
    )
    let output = ""
    child.stdout.on("data", (d) => (output += d))
    child.stderr.on("data", (d) => (output += d))
    child.on("close", (status) => {
      try {
        const rows = (
          JSON.parse(readFileSync(results, "utf8")) as { results: { results: ReadonlyArray<Row> } }
        ).results.results
        done({ status: status ?? 1, rows, output })
      } catch {
        done({ status: status ?? 1, output })
      }
    })
  })

/** The gateway on a copy of the example data, with the local model; its /v1 URL and a stop. */
const startGateway = async () => {
  const { Layer, Logger, LogLevel, ManagedRuntime, Option } = await import("effect")
  const NodeHttpServer = await import("@effect/platform-node/NodeHttpServer")
  const HttpServer = await import("@effect/platform/HttpServer")
  const GatewayConfig = await import("@ctxo/gateway/GatewayConfig")
  const { app } = await import("@ctxo/gateway/Server")
  const dataDir = mkdtempSync(join(tmpdir(), "ctxo-eval-gateway-"))
  cpSync(resolve(here, "../fixtures/data"), dataDir, { recursive: true })
  const runtime = ManagedRuntime.make(
    app.pipe(
      Layer.provide(GatewayConfig.layerTest({ dataDir, upstreamBaseUrl: Option.none() })),
      Layer.provideMerge(NodeHttpServer.layerTest),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
    )
  )
  const address = (await runtime.runPromise(HttpServer.HttpServer)).address
  const port = address._tag === "TcpAddress" ? address.port : 0
  return { url: `http://127.0.0.1:${port}/v1`, stop: () => runtime.dispose() }
}

const failures: Array<string> = []
let total = 0
const report = (suite: string, result: { status: number; rows?: ReadonlyArray<Row>; output: string }) => {
  if (result.rows === undefined) {
    process.stdout.write(result.output)
    failures.push(`${suite}: promptfoo wrote no results (exit ${result.status})`)
    return
  }
  total += result.rows.length
  for (const r of result.rows.filter((row) => !row.success)) {
    const reasons = r.gradingResult?.componentResults?.filter((c) => !c.pass).map((c) => c.reason) ?? []
    failures.push(
      `FAIL ${r.vars?.recording ?? r.vars?.question} [${r.provider?.label ?? r.provider?.id}]: ${reasons.join(" | ") || r.error}`
    )
  }
  if (result.status !== 0 && result.rows.every((r) => r.success))
    failures.push(`${suite}: promptfoo exited ${result.status}`)
}

report("sessions", await runSuite(live ? "live.yaml" : "promptfooconfig.yaml", "results"))
if (!live && only === undefined && process.env.CTXO_EVAL_BREAK === undefined) {
  const gateway = await startGateway()
  report("gateway", await runSuite("gateway.yaml", "gateway-results", { CTXO_GATEWAY_URL: gateway.url }))
  await gateway.stop()
}
for (const f of failures) console.log(f)
console.log(
  `ctxo eval: ${total - failures.filter((f) => f.startsWith("FAIL")).length} passed, ${failures.filter((f) => f.startsWith("FAIL")).length} failed (${sessions.length} sessions × ${only === undefined ? 4 : "4"} profiles${!live && only === undefined ? ", and the gateway suite" : ""}); results in evals/.out/`
)
process.exit(failures.length > 0 ? 1 : 0)
