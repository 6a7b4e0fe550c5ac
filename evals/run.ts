/**
 * `pnpm eval`: writes one promptfoo test per recorded session, runs the suite offline under tsx
 * (one provider per model profile), then the scenario suite (`scenarios.yaml`: each multi-session
 * scenario of fixtures/scenarios played through the real services for every profile), then the
 * gateway suite (promptfoo's openai provider against a gateway this script starts on the example
 * data with the local model). While it runs it prints a
 * line per session × profile as results arrive; at the end, a table of every invariant by profile,
 * each violation as one short line (details in `.out/failures.md` and `.out/failures.json`), and
 * it exits 1 on any failed assertion, on a profile that compiled nothing (a gate that checked no
 * request is not green), or when promptfoo wrote no results. The results are also written to the
 * project-local promptfoo database (`evals/.promptfoo`): `pnpm --filter @ctxo/evals view` shows them.
 * `pnpm eval:live` runs live.yaml against real providers (skipped when no API key is set).
 *
 * Environment:
 * - CTXO_EVAL_FIXTURES=<dir>   the recorded sessions (default ../fixtures/sessions)
 * - CTXO_EVAL_SESSIONS=a,b     only these sessions and scenarios (by file name without .json; no
 *                              generated ones)
 * - CTXO_EVAL_SCENARIOS=<dir>  the multi-session scenarios (default ../fixtures/scenarios; 0: none)
 * - CTXO_EVAL_GENERATED=<n>    generated sessions besides the fixtures (default 32; 0: none; none
 *                              either with CTXO_EVAL_SESSIONS)
 * - CTXO_EVAL_SEED=<seed>      the generator's seed (printed by every run; default: a fresh one)
 * - CTXO_EVAL_GATEWAY=0        skip the gateway suite
 * - CTXO_EVAL_BREAK=<breaker>  both suites with a broken compiler or compactor (@ctxo/replay/Breakers)
 * - CTXO_EVAL_OUT=<dir>        where results go (default .out); CTXO_EVAL_WRITE=0: not into promptfoo's database
 * - CTXO_EVAL_QUIET=1          no progress lines
 * - CTXO_EVAL_CONCURRENCY=<n>  promptfoo's concurrency (default 4)
 * - CTXO_EVAL_REPORT=<file>    also write {numPassedTests, numFailedTests} there (for .ci/run)
 */
import { spawn } from "node:child_process"
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, relative, resolve } from "node:path"
import { generatedTests } from "@ctxo/replay/Generate"
import { check, INVARIANTS, type Invariant, type ReplayEvidence } from "@ctxo/replay/Invariants"
import {
  checkScenario,
  SCENARIO_INVARIANTS,
  type ScenarioEvidence,
  type ScenarioInvariant
} from "@ctxo/replay/ScenarioInvariants"

const here = import.meta.dirname
const repo = resolve(here, "..")
const out = resolve(here, process.env.CTXO_EVAL_OUT ?? ".out")
const fixtures = resolve(repo, process.env.CTXO_EVAL_FIXTURES ?? "fixtures/sessions")
const scenarioDir =
  process.env.CTXO_EVAL_SCENARIOS === "0"
    ? undefined
    : resolve(repo, process.env.CTXO_EVAL_SCENARIOS ?? "fixtures/scenarios")
const live = process.argv.includes("--live")
const write = process.env.CTXO_EVAL_WRITE !== "0"
const quiet = process.env.CTXO_EVAL_QUIET === "1"
const gatewaySuite = !live && process.env.CTXO_EVAL_GATEWAY !== "0"
const started = performance.now()
const seconds = () => ((performance.now() - started) / 1000).toFixed(1)
const shown = (path: string) => {
  const rel = relative(process.cwd(), path)
  return rel.startsWith("..") ? path : rel || "."
}

if (live && process.env.OPENAI_API_KEY === undefined && process.env.ANTHROPIC_API_KEY === undefined) {
  console.log("pnpm eval:live skipped: set OPENAI_API_KEY and/or ANTHROPIC_API_KEY to run the live suite.")
  process.exit(0)
}

// --- the tests: one per recorded session, for each profile of promptfooconfig.yaml

const profilesOfSessions = ["gpt-4o", "gpt-4", "claude-sonnet-4-5", "gpt-3.5-turbo"]

const only = process.env.CTXO_EVAL_SESSIONS?.split(",")
  .map((s) => s.trim())
  .filter((s) => s !== "")
if (!existsSync(fixtures)) {
  console.log(`ctxo eval: no fixture folder ${fixtures}`)
  process.exit(1)
}
const sessions = readdirSync(fixtures)
  .filter((f) => f.endsWith(".json"))
  .sort()
  .filter((f) => only === undefined || only.includes(f.replace(/\.json$/, "")))
// The multi-session scenarios (not in the live suite), selected by the same names.
const scenarios =
  live || scenarioDir === undefined || !existsSync(scenarioDir)
    ? []
    : readdirSync(scenarioDir)
        .filter((f) => f.endsWith(".json"))
        .sort()
        .filter((f) => only === undefined || only.includes(f.replace(/\.json$/, "")))
if (sessions.length === 0 && scenarios.length === 0) {
  console.log(
    `ctxo eval: no recorded session in ${shown(fixtures)}${scenarioDir === undefined ? "" : ` and no scenario in ${shown(scenarioDir)}`}${only ? ` named ${only.join(", ")}` : ""}`
  )
  process.exit(1)
}
rmSync(out, { recursive: true, force: true })
mkdirSync(out, { recursive: true })
// Generated sessions (seeded; the seed is printed, CTXO_EVAL_SEED=<seed> replays the same ones),
// unless the run names its sessions or CTXO_EVAL_GENERATED=0.
const generatedCount = Number(process.env.CTXO_EVAL_GENERATED ?? "32")
const generated =
  live || only !== undefined || !(generatedCount > 0) || sessions.length === 0
    ? undefined
    : generatedTests({ dir: join(out, "generated"), root: repo, count: generatedCount })
// promptfoo's database keeps every run (each holds the full evidence, ~15 MB): start it afresh
// past 1 GB rather than let it grow without bound.
const database = resolve(here, ".promptfoo", "promptfoo.db")
if (write && existsSync(database) && statSync(database).size > 1024 ** 3) {
  rmSync(database, { force: true })
  console.log(`ctxo eval: ${shown(database)} was over 1 GB; started it afresh`)
}
const recordingOf = (f: string) => {
  const path = join(fixtures, f)
  const rel = relative(repo, path)
  return rel.startsWith("..") ? path : rel
}
writeFileSync(
  join(out, "tests.json"),
  JSON.stringify(
    [
      ...sessions.map((f) => {
        const s = JSON.parse(readFileSync(join(fixtures, f), "utf8")) as { id: string; description: string }
        return { description: `${s.id}: ${s.description}`, vars: { recording: recordingOf(f) } }
      }),
      ...(generated?.tests ?? [])
    ],
    null,
    2
  )
)
const sessionCount = sessions.length + (generated?.tests.length ?? 0)
const scenarioFile = (f: string) => {
  const path = join(scenarioDir!, f)
  const rel = relative(repo, path)
  return rel.startsWith("..") ? path : rel
}
writeFileSync(
  join(out, "scenario-tests.json"),
  JSON.stringify(
    scenarios.map((f) => {
      let title = f
      try {
        const s = JSON.parse(readFileSync(join(scenarioDir!, f), "utf8")) as {
          id: string
          description: string
        }
        title = `${s.id}: ${s.description}`
      } catch {
        // The provider reports what is wrong with the file.
      }
      return { description: title, vars: { scenario: scenarioFile(f) } }
    }),
    null,
    2
  )
)

// --- running promptfoo

interface Component {
  readonly pass: boolean
  readonly reason: string
  readonly assertion?: { readonly metric?: string; readonly value?: string }
}
interface Row {
  readonly success: boolean
  readonly provider?: { readonly label?: string; readonly id?: string }
  readonly vars?: { readonly recording?: string; readonly scenario?: string; readonly question?: string }
  readonly response?: { readonly output?: unknown }
  readonly error?: string
  readonly gradingResult?: { readonly componentResults?: ReadonlyArray<Component> }
}
interface Progress {
  readonly kind?: "scenario"
  readonly session: string
  readonly profile: string
  readonly steps?: number
  readonly aggregates?: number
  readonly compiles?: number
  readonly compactions?: number
  readonly refusals?: number
  readonly violations?: number
  readonly ms: number
  readonly error?: string
}

// The package hides its package.json from `exports`: find its folder in node_modules.
const promptfoo = join(here, "node_modules", "promptfoo", "dist", "src", "entrypoint.js")
const PROGRESS = "@@ctxo-progress "

/** Runs one promptfoo config; its rows, or undefined when it wrote no results. */
const runSuite = (
  config: string,
  name: string,
  expected: number,
  options: {
    readonly env?: Record<string, string>
    readonly tests?: string
    readonly description?: string
  } = {}
) =>
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
        ...(options.tests === undefined ? [] : ["-t", options.tests]),
        "--no-cache",
        ...(write ? [] : ["--no-write"]),
        "--no-progress-bar",
        "--no-share",
        "--no-table",
        "--description",
        `${options.description ?? name}${process.env.CTXO_EVAL_BREAK ? ` (broken: ${process.env.CTXO_EVAL_BREAK})` : ""}`,
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
          ...options.env,
          PROMPTFOO_CONFIG_DIR: resolve(here, ".promptfoo"),
          PROMPTFOO_DISABLE_TELEMETRY: "1",
          PROMPTFOO_DISABLE_UPDATE: "1",
          PROMPTFOO_DISABLE_SHARING: "1",
          PROMPTFOO_DISABLE_REMOTE_GENERATION: "true",
          PROMPTFOO_DISABLE_RUNTIME_WARNINGS: "1",
          PROMPTFOO_FAILED_TEST_EXIT_CODE: "1",
          CTXO_EVAL_PROGRESS: "1"
        }
      }
    )
    let output = ""
    let pending = ""
    let finished = 0
    const width = String(expected).length
    child.stdout.on("data", (d) => (output += d))
    child.stderr.on("data", (d) => {
      pending += d
      const lines = pending.split("\n")
      pending = lines.pop() ?? ""
      for (const line of lines) {
        const at = line.indexOf(PROGRESS)
        if (at === -1) {
          output += `${line}\n`
          continue
        }
        finished++
        if (quiet) continue
        let p: Progress
        try {
          p = JSON.parse(line.slice(at + PROGRESS.length)) as Progress
        } catch {
          continue
        }
        const what =
          p.error !== undefined
            ? `error: ${clip(p.error, 120)}`
            : p.kind === "scenario"
              ? `${p.steps} steps, ${p.compiles} compiles, ${p.aggregates} aggregates${p.violations ? `, ${p.violations} violations` : ""}`
              : `${p.compiles} compiles, ${p.compactions} compactions, ${p.refusals} refusals${p.violations ? `, ${p.violations} violations` : ""}`
        console.log(
          `  [${String(finished).padStart(width)}/${expected}] ${p.profile.padEnd(18)} ${p.session.padEnd(26)} ${what} (${(p.ms / 1000).toFixed(1)} s)`
        )
      }
    })
    child.on("close", (status) => {
      output += pending
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

/**
 * The gateway suite's compacting session (`long-task`, provider `gateway-compacting`): an earlier
 * summary over archived turns 1-2, then 14 finished turns, the last answer reporting 110,100 tokens
 * of gpt-4o's 128,000 (over the 80% trigger), so the suite's first question compacts. What must
 * hold after it (checked in assertions/gateway-upstream.js): the earlier summary reaches the model
 * word for word (a summary is never compressed again) and at least the last 10 turns are there, and turn 3 is archived (the compaction happened).
 */
const COMPACTING_SESSION = "long-task"
const EARLIER_SUMMARY = [
  "## 📌 Archived Session Summary",
  "*(Contains context from turn 1 to turn 2)*",
  "",
  "### 🎯 Objectives & Status",
  "* **Original Goal**: migrate the billing service to the new ledger API (kept word for word: LEDGER-MIGRATION-7731)",
  "",
  "### 📂 File System State (Snapshot)",
  "*(Modified files in this archive segment)*",
  "* (no files were written or edited)"
].join("\n")
const seedCompactingSession = (dataDir: string) => {
  const turn = (n: number, archived: boolean) => {
    const archive = archived ? { archivedBy: "s1-t1-2" } : {}
    return [
      {
        id: `t${n}-0`,
        role: "user",
        parts: [{ _tag: "text", text: `step ${n} of the long task` }],
        meta: { turn: n, kind: "input", ...archive }
      },
      {
        id: `t${n}-1`,
        role: "assistant",
        parts: [{ _tag: "text", text: `Done with step ${n}.` }],
        meta: {
          turn: n,
          step: 1,
          kind: "final",
          finished: true,
          ...(n === 16 ? { usage: { inputTokens: 110_000, outputTokens: 100 } } : {}),
          ...archive
        }
      }
    ]
  }
  const history = {
    format: "ctxo.history/v1",
    messages: Array.from({ length: 16 }, (_, i) => turn(i + 1, i < 2)).flat(),
    compression: [{ id: "s1-t1-2", text: EARLIER_SUMMARY, fromTurn: 1, toTurn: 2, messageCount: 4 }]
  }
  mkdirSync(join(dataDir, COMPACTING_SESSION), { recursive: true })
  writeFileSync(join(dataDir, COMPACTING_SESSION, "messages.json"), `${JSON.stringify(history, null, 2)}\n`)
  const manifest = {
    policy: "code-agent",
    model: "gpt-4o",
    systemPrompt: [{ type: "global", file: "system-prompt.md" }]
  }
  writeFileSync(
    join(dataDir, COMPACTING_SESSION, "context-config.json"),
    `${JSON.stringify(manifest, null, 2)}\n`
  )
  const index = JSON.parse(readFileSync(join(dataDir, "sessions.json"), "utf8")) as Array<unknown>
  index.push({
    id: COMPACTING_SESSION,
    concept: "A long task that compacts",
    createdAt: "2026-11-03T09:00:00.000Z"
  })
  writeFileSync(join(dataDir, "sessions.json"), `${JSON.stringify(index, null, 2)}\n`)
}

/**
 * The gateway on a copy of the example data, with the local model (a fake upstream that writes each
 * request it gets to .out/upstream.jsonl, where the gateway suite's assertions read what the model
 * was sent); with CTXO_EVAL_BREAK, the turn engine runs the broken compiler or compactor.
 */
const startGateway = async () => {
  const { Layer, Logger, LogLevel, ManagedRuntime, Option } = await import("effect")
  const HttpServer = await import("@effect/platform/HttpServer")
  const GatewayConfig = await import("@ctxo/gateway/GatewayConfig")
  const { appWith } = await import("@ctxo/gateway/Server")
  const { layerTest } = await import("@ctxo/gateway/ServerTest")
  const { seamsLive } = await import("@ctxo/agent/TurnEngine")
  const { brokenLayer } = await import("@ctxo/replay/Breakers")
  const { startFakeUpstream } = await import("@ctxo/agent/FakeUpstream")
  // Where assertions/gateway-upstream.js reads it: evals/.out, whatever CTXO_EVAL_OUT says.
  const upstreamLog = join(here, ".out", "upstream.jsonl")
  mkdirSync(dirname(upstreamLog), { recursive: true })
  writeFileSync(upstreamLog, "")
  const upstream = await startFakeUpstream({
    keepRequests: false,
    onRequest: (r) => appendFileSync(upstreamLog, `${JSON.stringify(r.body)}\n`)
  })
  const dataDir = mkdtempSync(join(tmpdir(), "ctxo-eval-gateway-"))
  // Removed however the run ends (a failed suite, process.exit), not only by stop().
  process.on("exit", () => rmSync(dataDir, { recursive: true, force: true }))
  cpSync(resolve(here, "../fixtures/data"), dataDir, { recursive: true })
  seedCompactingSession(dataDir)
  const broken = (process.env.CTXO_EVAL_BREAK || undefined) as Parameters<typeof brokenLayer>[0] | undefined
  const runtime = ManagedRuntime.make(
    appWith(broken === undefined ? seamsLive : brokenLayer(broken)).pipe(
      Layer.provide(GatewayConfig.layerTest({ dataDir, upstreamBaseUrl: Option.some(upstream.url) })),
      Layer.provideMerge(layerTest),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
    )
  )
  const address = (await runtime.runPromise(HttpServer.HttpServer)).address
  const port = address._tag === "TcpAddress" ? address.port : 0
  return {
    url: `http://127.0.0.1:${port}/v1`,
    stop: async () => {
      await runtime.dispose()
      await upstream.close()
      rmSync(dataDir, { recursive: true, force: true })
    }
  }
}

// --- reporting

function clip(text: string, max: number) {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

/** One failure: where, which check, and what broke (short); `detail` goes to the failures file. */
interface Failure {
  readonly suite: string
  readonly session: string
  readonly profile: string
  readonly turn?: number
  readonly step?: number
  readonly phase?: string
  readonly invariant: string
  readonly message: string
  readonly excerpt?: string
}

const failures: Array<Failure> = []
const problems: Array<string> = []
/** metric -> profile -> [passed, failed] (sessions). */
const table = new Map<string, Map<string, [number, number]>>()
/** profile -> compiles, compactions, refusals, failed compiles, sessions. */
const totals = new Map<
  string,
  { compiles: number; compactions: number; refusals: number; failedCompiles: number; sessions: number }
>()
/** profile -> scenario steps played, compiles and aggregates (the scenario suite). */
const scenarioTotals = new Map<string, { steps: number; compiles: number; aggregates: number }>()
const profiles: Array<string> = []
let rowsTotal = 0
let rowsFailed = 0

const sessionOf = (row: Row) => {
  const file = row.vars?.recording ?? row.vars?.scenario
  return file === undefined ? (row.vars?.question ?? "?") : file.replace(/^.*\//, "").replace(/\.json$/, "")
}

const evidenceOf = (row: Row): ReplayEvidence | undefined => {
  const output = row.response?.output
  if (typeof output !== "string") return undefined
  try {
    const parsed = JSON.parse(output) as ReplayEvidence
    return Array.isArray(parsed.points) ? parsed : undefined
  } catch {
    return undefined
  }
}

const scenarioEvidenceOf = (row: Row): ScenarioEvidence | undefined => {
  const output = row.response?.output
  if (typeof output !== "string" || row.vars?.scenario === undefined) return undefined
  try {
    const parsed = JSON.parse(output) as ScenarioEvidence
    return Array.isArray(parsed.steps) && Array.isArray(parsed.budgets) ? parsed : undefined
  } catch {
    return undefined
  }
}

const count = (metric: string, profile: string, pass: boolean) => {
  const byProfile = table.get(metric) ?? new Map<string, [number, number]>()
  table.set(metric, byProfile)
  const cell = byProfile.get(profile) ?? [0, 0]
  cell[pass ? 0 : 1]++
  byProfile.set(profile, cell)
}

const report = (suite: string, result: { status: number; rows?: ReadonlyArray<Row>; output: string }) => {
  if (result.rows === undefined) {
    process.stdout.write(result.output)
    problems.push(`${suite}: promptfoo wrote no results (exit ${result.status})`)
    return
  }
  if (result.rows.length === 0) problems.push(`${suite}: promptfoo ran no test`)
  rowsTotal += result.rows.length
  for (const row of result.rows) {
    const profile = row.provider?.label ?? row.provider?.id ?? "?"
    if (!profiles.includes(profile)) profiles.push(profile)
    const session = sessionOf(row)
    const evidence = evidenceOf(row)
    const scenarioEvidence = scenarioEvidenceOf(row)
    if (scenarioEvidence !== undefined) {
      const t = scenarioTotals.get(profile) ?? { steps: 0, compiles: 0, aggregates: 0 }
      t.steps += scenarioEvidence.steps.length
      t.compiles += scenarioEvidence.budgets.filter((b) => b.what === "compile").length
      t.aggregates += scenarioEvidence.aggregates.length
      scenarioTotals.set(profile, t)
    }
    if (evidence !== undefined) {
      const t = totals.get(profile) ?? {
        compiles: 0,
        compactions: 0,
        refusals: 0,
        failedCompiles: 0,
        sessions: 0
      }
      t.compiles += evidence.points.length
      t.compactions += evidence.compactions.filter((c) => c.status !== "not-needed").length
      t.refusals += evidence.failures.filter((f) => f.refusal).length
      t.failedCompiles += evidence.failures.filter((f) => !f.refusal).length
      t.sessions++
      totals.set(profile, t)
    }
    if (!row.success) rowsFailed++
    const components = row.gradingResult?.componentResults ?? []
    for (const c of components)
      count(c.assertion?.metric ?? c.assertion?.value ?? "assertion", profile, c.pass)
    if (row.success) continue
    if (components.length === 0 || components.every((c) => c.pass)) {
      failures.push({
        suite,
        session,
        profile,
        invariant: "error",
        message: row.error ?? "the test failed without a failed assertion"
      })
      continue
    }
    for (const c of components.filter((x) => !x.pass)) {
      const metric = c.assertion?.metric ?? "assertion"
      if (scenarioEvidence !== undefined && (SCENARIO_INVARIANTS as ReadonlyArray<string>).includes(metric)) {
        const found = checkScenario(scenarioEvidence, metric as ScenarioInvariant)
        if (found.length === 0)
          failures.push({ suite, session, profile, invariant: metric, message: c.reason })
        // A scenario's step numbers count from 1, as a person reads the file's steps.
        for (const v of found)
          failures.push({
            suite,
            session,
            profile,
            ...(v.step < 0 ? {} : { step: v.step + 1 }),
            invariant: metric,
            message: v.message,
            ...(v.excerpt === v.message ? {} : { excerpt: v.excerpt })
          })
        continue
      }
      const violations =
        evidence !== undefined && (INVARIANTS as ReadonlyArray<string>).includes(metric)
          ? check(evidence, metric as Invariant)
          : []
      if (violations.length === 0) {
        failures.push({ suite, session, profile, invariant: metric, message: c.reason })
        continue
      }
      for (const v of violations)
        failures.push({
          suite,
          session,
          profile,
          turn: v.turn,
          step: v.step,
          phase: v.phase,
          invariant: metric,
          message: v.message,
          ...(v.excerpt === v.message ? {} : { excerpt: v.excerpt })
        })
    }
  }
  if (result.status !== 0 && result.rows.every((r) => r.success))
    problems.push(`${suite}: promptfoo exited ${result.status}: ${clip(result.output, 280)}`)
}

const where = (f: Failure) =>
  `${f.session}${f.turn === undefined ? "" : ` turn ${f.turn}`}${f.step ? ` step ${f.step}` : ""}${f.phase === "retry" ? " (retry)" : ""} [${f.profile}]`
/** One line: where, the invariant, then what broke and its excerpt, together under 300 characters. */
const line = (f: Failure) => {
  const what = f.excerpt === undefined ? f.message : `${clip(f.message, 200)} | ${f.excerpt}`
  return `FAIL ${where(f)} ${f.invariant}: ${clip(what, 280)}`
}

const sessionRows = sessionCount * profilesOfSessions.length
const sessionSuite = sessionCount > 0
console.log(
  `ctxo eval: ${sessions.length} sessions from ${shown(fixtures)}${generated === undefined ? "" : ` and ${generated.tests.length} generated (CTXO_EVAL_SEED=${generated.seed})`} × ${profilesOfSessions.length} profiles${scenarios.length > 0 ? `, ${scenarios.length} scenarios from ${shown(scenarioDir!)} × ${profilesOfSessions.length} profiles` : ""}${gatewaySuite ? ", then the gateway suite" : ""}${process.env.CTXO_EVAL_BREAK ? ` (broken: ${process.env.CTXO_EVAL_BREAK})` : ""}`
)
if (sessionSuite)
  report(
    "sessions",
    await runSuite(live ? "live.yaml" : "promptfooconfig.yaml", "results", sessionRows, {
      tests: join(out, "tests.json"),
      description: `ctxo sessions: ${sessions.length} from ${shown(fixtures)}${generated === undefined ? "" : ` and ${generated.tests.length} generated (seed ${generated.seed})`} × ${profilesOfSessions.length} profiles`
    })
  )
if (scenarios.length > 0) {
  if (!quiet) console.log(`  scenario suite (many sessions through the real services) at ${seconds()} s`)
  report(
    "scenarios",
    await runSuite("scenarios.yaml", "scenario-results", scenarios.length * profilesOfSessions.length, {
      tests: join(out, "scenario-tests.json"),
      description: `ctxo scenarios: ${scenarios.length} from ${shown(scenarioDir!)} × ${profilesOfSessions.length} profiles`
    })
  )
}
if (gatewaySuite) {
  if (!quiet)
    console.log(`  gateway suite (promptfoo's openai provider through the gateway) at ${seconds()} s`)
  const gateway = await startGateway()
  try {
    // 2 questions × 3 providers (session, compacting session, proxy).
    const result = await runSuite("gateway.yaml", "gateway-results", 6, {
      env: { CTXO_GATEWAY_URL: gateway.url },
      description: "ctxo gateway: promptfoo's openai provider through the gateway"
    })
    report("gateway", result)
    if (!quiet && result.rows !== undefined)
      console.log(
        `  gateway suite: ${result.rows.filter((r) => r.success).length} of ${result.rows.length} passed`
      )
  } finally {
    await gateway.stop()
  }
}

// Never green on nothing: every profile of the sessions suite must have compiled something, and
// every profile of the scenario suite must have played its steps.
if (!live && sessionSuite)
  for (const profile of profilesOfSessions) {
    const t = totals.get(profile)
    if (t === undefined || t.compiles === 0)
      problems.push(
        `profile ${profile}: no compile in ${t?.sessions ?? 0} sessions (${t?.refusals ?? 0} refused, ${t?.failedCompiles ?? 0} failed): a gate that checked no request is not green`
      )
  }
if (scenarios.length > 0)
  for (const profile of profilesOfSessions) {
    const t = scenarioTotals.get(profile)
    if (t === undefined || t.steps === 0)
      problems.push(
        `profile ${profile}: no scenario step played in ${scenarios.length} scenarios: a gate that played nothing is not green`
      )
  }

// --- the table: pass/fail per invariant (sessions) and profile

// The sessions suite's profiles in the config's order, then the gateway suite's.
profiles.sort((a, b) => {
  const rank = (p: string) => {
    const i = profilesOfSessions.indexOf(p)
    return i === -1 ? profilesOfSessions.length : i
  }
  return rank(a) - rank(b)
})
const cell = (c: [number, number] | undefined) =>
  c === undefined ? "-" : c[1] === 0 ? `${c[0]}` : `${c[0]} ✗${c[1]}`
const columns = profiles.map((p) => Math.max(p.length, 7))
// The first column as wide as the longest invariant's name (scenario invariants are longer).
const label = Math.max(18, ...[...table.keys()].map((m) => m.length + 1))
const head = `${"invariant".padEnd(label)} ${profiles.map((p, i) => p.padStart(columns[i]!)).join("  ")}`
console.log(`\n${head}\n${"-".repeat(head.length)}`)
for (const [metric, byProfile] of table)
  console.log(
    `${metric.padEnd(label)} ${profiles.map((p, i) => cell(byProfile.get(p)).padStart(columns[i]!)).join("  ")}`
  )
const stat = (f: (t: NonNullable<ReturnType<typeof totals.get>>) => number) =>
  profiles.map((p, i) => {
    const t = totals.get(p)
    return (t === undefined ? "-" : String(f(t))).padStart(columns[i]!)
  })
console.log(`${"-".repeat(head.length)}`)
console.log(`${"compiled".padEnd(label)} ${stat((t) => t.compiles).join("  ")}`)
console.log(`${"compacted".padEnd(label)} ${stat((t) => t.compactions).join("  ")}`)
console.log(`${"refused".padEnd(label)} ${stat((t) => t.refusals).join("  ")}`)
if (scenarioTotals.size > 0) {
  const played = (f: (t: { steps: number; compiles: number; aggregates: number }) => number) =>
    profiles.map((p, i) => {
      const t = scenarioTotals.get(p)
      return (t === undefined ? "-" : String(f(t))).padStart(columns[i]!)
    })
  console.log(`${"scenario steps".padEnd(label)} ${played((t) => t.steps).join("  ")}`)
  console.log(`${"scenario compiles".padEnd(label)} ${played((t) => t.compiles).join("  ")}`)
  console.log(`${"aggregated".padEnd(label)} ${played((t) => t.aggregates).join("  ")}`)
}
console.log(
  `(invariants: sessions${scenarioTotals.size > 0 ? " and scenarios" : ""} passed, ✗ failed; then requests compiled, compactions, refusals${scenarioTotals.size > 0 ? "; scenario steps played, their compiles and aggregates" : ""})`
)

// --- failures: one short line each on the console, all of them with details in a file

const MAX_PER_CHECK = 3
const MAX_LINES = 80
if (failures.length > 0) {
  console.log("")
  const groups = new Map<string, Array<Failure>>()
  for (const f of failures) {
    const key = `${f.suite}\u0000${f.session}\u0000${f.profile}\u0000${f.invariant}`
    groups.set(key, [...(groups.get(key) ?? []), f])
  }
  let printed = 0
  for (const list of groups.values()) {
    if (printed >= MAX_LINES) break
    for (const f of list.slice(0, MAX_PER_CHECK)) {
      console.log(line(f))
      printed++
    }
    if (list.length > MAX_PER_CHECK)
      console.log(`     … and ${list.length - MAX_PER_CHECK} more ${list[0]!.invariant} violations here`)
  }
  if (printed >= MAX_LINES) console.log(`… ${failures.length - printed} more failures`)
}
const failuresMd = join(out, "failures.md")
writeFileSync(join(out, "failures.json"), JSON.stringify({ problems, failures }, null, 2))
writeFileSync(
  failuresMd,
  [
    `# ctxo eval failures`,
    "",
    ...problems.map((p) => `- ${p}`),
    ...(problems.length > 0 ? [""] : []),
    ...failures.map(
      (f) =>
        `## ${where(f)} ${f.invariant}\n\n${f.message}${f.excerpt === undefined ? "" : `\n\n\`\`\`text\n${f.excerpt}\n\`\`\``}\n`
    ),
    failures.length === 0 && problems.length === 0 ? "None.\n" : ""
  ].join("\n")
)
for (const p of problems) console.log(`FAIL ${p}`)

const ok = rowsFailed === 0 && problems.length === 0
console.log(
  `\nctxo eval: ${rowsTotal - rowsFailed} passed, ${rowsFailed} failed (${sessionCount} sessions × ${profilesOfSessions.length} profiles${scenarios.length > 0 ? `, ${scenarios.length} scenarios × ${profilesOfSessions.length} profiles` : ""}${gatewaySuite ? ", and the gateway suite" : ""})${problems.length > 0 ? `, ${problems.length} gate problems` : ""} in ${seconds()} s`
)
if (!ok) console.log(`details: ${shown(failuresMd)}`)
if (!ok && generated !== undefined && failures.some((f) => f.session.startsWith("gen-")))
  console.log(`generated sessions failed: CTXO_EVAL_SEED=${generated.seed} pnpm eval replays the same ones`)
console.log(
  `results: ${shown(out)}${write ? "; browse them with `pnpm --filter @ctxo/evals view` (offline)" : ""}`
)
// For `.ci/run`, which sums every package's passed and failed checks (`CTXO_EVAL_REPORT=<file>`, set
// by the package's test script only, not by the gate's own tests): each session × profile and
// scenario × profile row and the gateway suite's tests, gate problems as failures.
const reportFile = process.env.CTXO_EVAL_REPORT
if (reportFile !== undefined && reportFile !== "") {
  mkdirSync(dirname(resolve(reportFile)), { recursive: true })
  writeFileSync(
    resolve(reportFile),
    JSON.stringify({ numPassedTests: rowsTotal - rowsFailed, numFailedTests: rowsFailed + problems.length })
  )
}
process.exit(ok ? 0 : 1)
