/**
 * A change's speed against another revision, measured in pairs in one process: this machine's
 * speed moves by 2x within minutes, which hides any change under about 10% in benchmark runs made
 * one after another.
 *
 *   node scripts/paired.mjs <revision> <package>/bench/paired.ts [pairs]
 *   pnpm paired HEAD~1 packages/compiler/bench/paired.ts
 *
 * The harness (`paired.ts`: `setup()` resolves to named operations) and its bench folder are the
 * working tree's for both sides; the package sources differ: the working tree's, and the revision's
 * (`git archive` of its `packages/` in a temporary folder, its `@ctxo/*` imports resolved there).
 * Both are bundled by esbuild, as the apps are, into the harness's folder (so paths it makes from
 * `import.meta.url` resolve as from the source), and loaded in one process: each operation runs
 * once on each side in turn (which side goes first alternates), `pairs` times (default 400) after
 * 50 untimed. A second process loads them the other way round: the side loaded second runs 2-5%
 * faster, whichever it is, and the two orders' paired ratios divide that out. Prints, per operation,
 * the medians and `working tree / revision`, the geometric mean of the two orders' medians of the
 * paired ratios (repeated runs of one change spread by about 2 points). Only ctxo's own sources
 * differ between the sides: both use the working tree's dependencies (`node_modules`), so a
 * revision that changed a dependency's version is measured with the working tree's.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { cpSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { basename, dirname, join, relative, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { nodeBundle } from "./bundle.mjs"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

// --- child: `--run <first> <second> <pairs>` times each operation in pairs, prints JSON
if (process.argv[2] === "--run") {
  const [first, second, pairs] = [process.argv[3], process.argv[4], Number(process.argv[5])]
  const a = await (await import(pathToFileURL(first).href)).setup()
  const b = await (await import(pathToFileURL(second).href)).setup()
  const timed = async (f) => {
    const start = performance.now()
    await f()
    return performance.now() - start
  }
  const out = {}
  for (const name of Object.keys(a)) {
    for (let i = 0; i < 50; i++) {
      await a[name]()
      await b[name]()
    }
    const ta = []
    const tb = []
    for (let i = 0; i < pairs; i++) {
      if (i % 2 === 0) {
        ta.push(await timed(a[name]))
        tb.push(await timed(b[name]))
      } else {
        tb.push(await timed(b[name]))
        ta.push(await timed(a[name]))
      }
    }
    out[name] = { first: median(ta), second: median(tb), ratio: median(tb.map((t, i) => t / ta[i])) }
  }
  console.log(JSON.stringify(out))
  process.exit(0)
}

// --- parent
const [revision, harness, pairsArg] = process.argv.slice(2)
if (revision === undefined || harness === undefined) {
  console.error("usage: node scripts/paired.mjs <revision> <package>/bench/paired.ts [pairs]")
  process.exit(2)
}
const pairs = Number(pairsArg ?? 400)
if (!Number.isInteger(pairs) || pairs < 1) {
  console.error(`pairs must be a whole number of at least 1, not ${pairsArg}`)
  process.exit(2)
}
const entry = resolve(harness)
const benchDir = dirname(entry)
const packagesDir = join(root, "packages")
const fromRoot = relative(root, entry)
const commit = execFileSync("git", ["rev-parse", "--short", revision], { cwd: root, encoding: "utf8" }).trim()

const tree = mkdtempSync(join(tmpdir(), "ctxo-paired-"))
const outputs = [`.paired-${process.pid}-working.mjs`, `.paired-${process.pid}-${commit}.mjs`].map((f) =>
  join(benchDir, f)
)
process.on("exit", () => {
  rmSync(tree, { recursive: true, force: true })
  for (const f of outputs) rmSync(f, { force: true })
})
process.on("SIGINT", () => process.exit(130))
process.on("SIGTERM", () => process.exit(143))

// The revision's packages (and the tsconfig they extend), with the working tree's bench folder of the
// harness's package.
const archive = spawnSync("git", ["archive", "--format=tar", commit, "packages", "tsconfig.base.json"], {
  cwd: root,
  maxBuffer: 1 << 30
})
if (archive.status !== 0) throw new Error(`git archive ${commit}: ${archive.stderr}`)
execFileSync("tar", ["-x", "-C", tree], { input: archive.stdout })
cpSync(benchDir, join(tree, relative(root, benchDir)), { recursive: true })

const { build } = await import("esbuild")
// As the apps are bundled; a baseline library a harness compares with (`@langchain/*`) runs as its
// package ships.
const app = nodeBundle()
const options = { ...app, external: [...app.external, "@langchain/*"], logLevel: "warning" }
// Every package's dependencies, for the revision's files (which have no node_modules beside them).
const nodePaths = [
  ...readdirSync(packagesDir).map((p) => join(packagesDir, p, "node_modules")),
  join(root, "node_modules")
]
const revisionPackages = {
  name: "the revision's @ctxo packages",
  setup(b) {
    // Each package exports "./*" as "./src/*.ts" and nothing under "./internal/"; any other
    // @ctxo import would resolve to the working tree's sources, so it is refused.
    b.onResolve({ filter: /^@ctxo\// }, (args) => {
      const [, name, ...rest] = args.path.split("/")
      if (rest.length === 0 || rest[0] === "internal")
        return {
          errors: [{ text: `${args.path} is not a module the package exports (@ctxo/<package>/<module>)` }]
        }
      return { path: join(tree, "packages", name, "src", `${rest.join("/")}.ts`) }
    })
  }
}
await build({ ...options, entryPoints: [entry], outfile: outputs[0] })
await build({
  ...options,
  entryPoints: [join(tree, fromRoot)],
  outfile: outputs[1],
  nodePaths,
  plugins: [revisionPackages]
})

// The tokenizers, outside the bundles, are the budget package's dependencies.
const env = { ...process.env, NODE_PATH: join(packagesDir, "budget/node_modules") }
const run = (first, second) => {
  const r = spawnSync(
    process.execPath,
    [fileURLToPath(import.meta.url), "--run", first, second, String(pairs)],
    {
      env,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"],
      maxBuffer: 1 << 26
    }
  )
  if (r.status !== 0)
    throw new Error(
      `a paired run failed (${r.error?.message ?? (r.signal ? `killed by ${r.signal}` : `exit ${r.status}`)})`
    )
  return JSON.parse(r.stdout.trim().split("\n").at(-1))
}
const [working, other] = outputs
const revisionFirst = run(other, working)
const workingFirst = run(working, other)
const ms = (n) => `${n.toFixed(3)} ms`
console.log(
  `${basename(dirname(benchDir))}: the working tree against ${commit}, ${pairs} pairs in each order`
)
for (const name of Object.keys(revisionFirst)) {
  const x = revisionFirst[name]
  const y = workingFirst[name]
  // x.ratio = working / revision × bias; y.ratio = revision / working × bias.
  const ratio = Math.sqrt(x.ratio / y.ratio)
  console.log(
    `  ${name}: working tree ${ms((x.second + y.first) / 2)}, ${commit} ${ms((x.first + y.second) / 2)} (medians); working tree / ${commit} ${ratio.toFixed(3)} (the two orders' paired ratios ${x.ratio.toFixed(3)} and ${(1 / y.ratio).toFixed(3)})`
  )
}
