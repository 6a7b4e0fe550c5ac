/**
 * The apps' bundles (`apps/gateway/dist/main.js`, `apps/cli/dist/ctxo.js`): one ESM file each,
 * built by esbuild from the TypeScript sources. A bundle runs several times faster than the same
 * sources through tsx (whose transform wraps every function it makes in a name-keeping helper) and
 * starts in a fraction of the time. Plain JavaScript: `pnpm start` and `pnpm ctxo` run it with
 * node alone.
 */
import { existsSync, readdirSync, statSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { build } from "esbuild"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")

/** Builds `entry` into `outfile`, with `banner` first (a shebang, for a bin). */
export const bundle = ({ entry, outfile, banner = "" }) =>
  build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "esm",
    // Prefer packages' ESM builds: some UMD builds (jsonc-parser) hide their requires from bundlers.
    mainFields: ["module", "main"],
    // Loaded at run time from node_modules: tiktoken reads its WASM file beside it, and the
    // encodings of gpt-tokenizer are required lazily, only for the encodings a run needs.
    external: ["tiktoken", "gpt-tokenizer", "gpt-tokenizer/*", "esbuild"],
    banner: {
      js: `${banner}import { createRequire as __ctxoRequire } from 'node:module'; const require = __ctxoRequire(import.meta.url);`
    },
    sourcemap: "linked",
    logLevel: "warning"
  })

/** The newest modification time of the files under `dir` (0 when it does not exist). */
const newest = (dir) => {
  if (!existsSync(dir)) return 0
  let latest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true }))
    if (entry.isFile()) latest = Math.max(latest, statSync(join(entry.parentPath, entry.name)).mtimeMs)
  return latest
}

/** When the sources of a bundle last changed: the app's `src/`, every package's `src/`, the lockfile. */
const sourcesChangedAt = (app) =>
  Math.max(
    newest(join(app, "src")),
    ...readdirSync(join(root, "packages")).map((p) => newest(join(root, "packages", p, "src"))),
    statSync(join(root, "pnpm-lock.yaml")).mtimeMs
  )

/**
 * Builds the bundle unless it is newer than every source it is made of (a walk of the `src/`
 * folders, a few milliseconds); says so on stderr when it builds. Resolves to whether it built.
 */
export const ensureBundle = async (options) => {
  const app = dirname(options.entry).replace(/\/src$/, "")
  if (existsSync(options.outfile) && statSync(options.outfile).mtimeMs >= sourcesChangedAt(app)) return false
  const started = performance.now()
  await bundle(options)
  const shown = options.outfile.slice(root.length + 1)
  console.error(`ctxo: built ${shown} in ${Math.round(performance.now() - started)} ms`)
  return true
}
