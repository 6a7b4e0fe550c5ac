/**
 * `pnpm eval:mutants`: proves that `pnpm eval` alone fails on each mutant of `mutants/mutants.ts`
 * and names the invariant. The repository is copied to a temporary folder (the working tree's
 * tracked and untracked files, or `CTXO_MUTANTS_REV=<rev>`'s; the installed node_modules are
 * linked, not copied); the eval runs there once unmutated (it must pass, else nothing is proved),
 * then once per mutant with that one mutant applied, on the mutant's subset of fixtures. Prints a
 * table (mutant, expected invariant, caught?, what named it, time), writes it to
 * `.out/mutants.md` and `.out/mutants.json`, and exits 1 when any mutant escaped or no longer applies.
 *
 * CTXO_MUTANTS=a,b runs only these; CTXO_MUTANTS_CONCURRENCY=<n> runs n at a time (default 1: the
 * eval itself runs 4 replays at once); CTXO_MUTANTS_VERBOSE=1 prints each eval's output.
 */
import { execFileSync, spawn } from "node:child_process"
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { type Mutant, mutants } from "./mutants/mutants.ts"

const here = import.meta.dirname
const repo = resolve(here, "..")
const out = join(here, ".out")
const started = performance.now()
const only = process.env.CTXO_MUTANTS?.split(",").map((s) => s.trim())
const selected = mutants.filter((m) => only === undefined || only.includes(m.name))
const concurrency = Math.max(1, Number(process.env.CTXO_MUTANTS_CONCURRENCY ?? "1"))

/** A copy of the repository to mutate: sources copied, installed packages linked. */
const makeCopy = (): string => {
  const root = mkdtempSync(join(tmpdir(), "ctxo-mutants-"))
  const rev = process.env.CTXO_MUTANTS_REV
  if (rev !== undefined) {
    const archive = execFileSync("git", ["archive", "--format=tar", rev], { cwd: repo, maxBuffer: 1 << 30 })
    execFileSync("tar", ["-x", "-C", root], { input: archive })
  } else {
    const files = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
      cwd: repo,
      maxBuffer: 1 << 28
    })
      .toString("utf8")
      .split("\0")
      .filter((f) => f !== "")
    for (const f of files) {
      const from = join(repo, f)
      if (!existsSync(from)) continue // deleted in the working tree
      mkdirSync(dirname(join(root, f)), { recursive: true })
      cpSync(from, join(root, f), { verbatimSymlinks: true })
    }
  }
  // The root node_modules is linked whole; each workspace package's own node_modules is copied as
  // the relative links it is, so `@ctxo/*` resolves inside the copy and the rest to the same store.
  symlinkSync(join(repo, "node_modules"), join(root, "node_modules"))
  for (const group of ["apps", "packages", "."]) {
    const base = join(repo, group)
    const dirs = group === "." ? ["evals"] : existsSync(base) ? readdirSync(base) : []
    for (const d of dirs) {
      const modules = join(base, d, "node_modules")
      if (!existsSync(modules) || !existsSync(join(root, group, d))) continue
      mkdirSync(join(root, group, d, "node_modules"), { recursive: true })
      for (const entry of readdirSync(modules)) {
        if (entry.startsWith(".")) continue // .bin, .vite: caches
        cpSync(join(modules, entry), join(root, group, d, "node_modules", entry), {
          recursive: true,
          verbatimSymlinks: true
        })
      }
    }
  }
  return root
}

interface EvalRun {
  readonly status: number
  readonly stdout: string
  readonly named: ReadonlyArray<string>
  readonly seconds: number
}

/** `pnpm eval` in a copy, on some fixtures; which invariants its failures named. */
const runEval = (root: string, name: string, env: Record<string, string>) =>
  new Promise<EvalRun>((done) => {
    const t0 = performance.now()
    const evalOut = join(root, "evals", ".mutant-out", name.replace(/[^a-z0-9-]/gi, "_"))
    const child = spawn(process.execPath, ["--import", "tsx/esm", "run.ts"], {
      cwd: join(root, "evals"),
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        CTXO_EVAL_GATEWAY: "0",
        CTXO_EVAL_WRITE: "0",
        CTXO_EVAL_QUIET: "1",
        CTXO_EVAL_CONCURRENCY: process.env.CTXO_EVAL_CONCURRENCY ?? "4",
        CTXO_EVAL_OUT: evalOut,
        ...env
      }
    })
    let stdout = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stdout += d))
    child.on("close", (status) => {
      let named: Array<string> = []
      try {
        const report = JSON.parse(readFileSync(join(evalOut, "failures.json"), "utf8")) as {
          failures: ReadonlyArray<{ invariant: string }>
          problems: ReadonlyArray<string>
        }
        named = [...new Set(report.failures.map((f) => f.invariant))]
        if (report.problems.some((p) => p.startsWith("profile "))) named.push("no-compiles")
      } catch {
        named = []
      }
      done({ status: status ?? 1, stdout, named, seconds: (performance.now() - t0) / 1000 })
    })
  })

const isSource = (m: Mutant): m is Extract<Mutant, { file: string }> => "file" in m

type Verdict = "caught" | "escaped" | "wrong invariant" | "does not apply"
interface Outcome {
  readonly mutant: Mutant
  readonly verdict: Verdict
  readonly named: ReadonlyArray<string>
  readonly seconds: number
  readonly note?: string
}

/** Applies one mutant in the copy, runs the eval, puts the file back. */
const tryMutant = async (root: string, m: Mutant): Promise<Outcome> => {
  const env: Record<string, string> = {
    ...(m.sessions === undefined ? {} : { CTXO_EVAL_SESSIONS: m.sessions.join(",") }),
    ...(m.gateway ? { CTXO_EVAL_GATEWAY: "1" } : {})
  }
  let restore = () => {}
  if (isSource(m)) {
    const path = join(root, m.file)
    if (!existsSync(path))
      return { mutant: m, verdict: "does not apply", named: [], seconds: 0, note: "no such file" }
    const original = readFileSync(path, "utf8")
    const at = original.indexOf(m.find)
    if (at === -1 || original.indexOf(m.find, at + 1) !== -1)
      return {
        mutant: m,
        verdict: "does not apply",
        named: [],
        seconds: 0,
        note: at === -1 ? "the code it mutates is gone" : "the code it mutates occurs twice"
      }
    writeFileSync(path, original.slice(0, at) + m.replace + original.slice(at + m.find.length))
    restore = () => writeFileSync(path, original)
  } else env.CTXO_EVAL_BREAK = m.breaker
  try {
    const run = await runEval(root, m.name, env)
    const verdict: Verdict =
      run.status === 0
        ? "escaped"
        : m.catches.some((c) => run.named.includes(c))
          ? "caught"
          : run.named.length > 0
            ? "wrong invariant"
            : "escaped"
    if (process.env.CTXO_MUTANTS_VERBOSE === "1") console.log(run.stdout)
    const tail = run.stdout.trim().split("\n").slice(-3).join(" / ")
    return {
      mutant: m,
      verdict,
      named: run.named,
      seconds: run.seconds,
      ...(verdict === "escaped" && run.status !== 0 ? { note: tail.slice(0, 200) } : {})
    }
  } finally {
    restore()
  }
}

console.log(
  `ctxo eval:mutants: ${selected.length} mutants, each applied alone to a copy of the repository${process.env.CTXO_MUTANTS_REV ? ` at ${process.env.CTXO_MUTANTS_REV}` : ""}`
)
const copies = Array.from({ length: Math.min(concurrency, selected.length) }, makeCopy)
process.on("exit", () => {
  for (const c of copies) rmSync(c, { recursive: true, force: true })
})

// The unmutated code must pass on every subset used, else a failure proves nothing.
const subsets = [...new Set(selected.flatMap((m) => m.sessions ?? []))]
const everything = selected.some((m) => m.sessions === undefined)
const baseline = await runEval(
  copies[0]!,
  "baseline",
  everything ? {} : { CTXO_EVAL_SESSIONS: subsets.join(",") }
)
console.log(
  `baseline (no mutant, ${everything ? "all" : subsets.length} fixtures): ${baseline.status === 0 ? "passes" : "FAILS"} in ${baseline.seconds.toFixed(1)} s`
)
if (baseline.status !== 0) {
  console.log(baseline.stdout.trim().split("\n").slice(-25).join("\n"))
  console.log("ctxo eval:mutants: the eval fails without any mutant; fix that first (nothing is proved).")
  process.exit(1)
}

const outcomes: Array<Outcome> = []
const queue = [...selected]
const nameWidth = Math.max(...selected.map((m) => m.name.length))
const expectedWidth = Math.max(18, ...selected.map((m) => m.catches[0]!.length))
const header = `${"mutant".padEnd(nameWidth)}  ${"expected".padEnd(expectedWidth)}  ${"result".padEnd(16)}  ${"named by the eval".padEnd(34)}  time`
console.log(`\n${header}\n${"-".repeat(header.length)}`)
const row = (o: Outcome) =>
  `${o.mutant.name.padEnd(nameWidth)}  ${o.mutant.catches[0]!.padEnd(expectedWidth)}  ${(o.verdict === "caught" ? "caught" : `${o.verdict.toUpperCase()}`).padEnd(16)}  ${(o.named.join(", ") || "-").slice(0, 34).padEnd(34)}  ${o.seconds.toFixed(1)} s${o.note ? `  (${o.note})` : ""}`
await Promise.all(
  copies.map(async (root) => {
    for (let m = queue.shift(); m !== undefined; m = queue.shift()) {
      const outcome = await tryMutant(root, m)
      outcomes.push(outcome)
      console.log(row(outcome))
    }
  })
)

const caught = outcomes.filter((o) => o.verdict === "caught").length
const total = (performance.now() - started) / 1000
mkdirSync(out, { recursive: true })
writeFileSync(
  join(out, "mutants.json"),
  JSON.stringify(
    outcomes.map((o) => ({
      name: o.mutant.name,
      bug: o.mutant.bug,
      expected: o.mutant.catches,
      verdict: o.verdict,
      named: o.named,
      seconds: Math.round(o.seconds * 10) / 10,
      sessions: o.mutant.sessions ?? "all",
      ...(o.note ? { note: o.note } : {})
    })),
    null,
    2
  )
)
writeFileSync(
  join(out, "mutants.md"),
  [
    "| mutant | bug | expected | result | named | fixtures | time |",
    "|---|---|---|---|---|---|---|",
    ...outcomes.map(
      (o) =>
        `| ${o.mutant.name} | ${o.mutant.bug} | ${o.mutant.catches.join(" / ")} | ${o.verdict} | ${o.named.join(", ") || "-"} | ${o.mutant.sessions?.join(", ") ?? "all"} | ${o.seconds.toFixed(1)} s |`
    ),
    "",
    `${caught} of ${outcomes.length} caught in ${total.toFixed(0)} s`
  ].join("\n")
)
console.log(
  `\nctxo eval:mutants: ${caught} of ${outcomes.length} caught by \`pnpm eval\` alone, naming the invariant (${outcomes.filter((o) => o.verdict === "escaped").length} escaped, ${outcomes.filter((o) => o.verdict === "wrong invariant").length} named another invariant, ${outcomes.filter((o) => o.verdict === "does not apply").length} no longer apply) in ${total.toFixed(0)} s; table in evals/.out/mutants.md`
)
process.exit(caught === outcomes.length ? 0 : 1)
