/**
 * The apps' bundles (`apps/gateway/dist/main.js`, `apps/cli/dist/ctxo.js`): one ESM file each,
 * built by esbuild from the TypeScript sources. A bundle runs several times faster than the same
 * sources through tsx (whose transform wraps every function it makes in a name-keeping helper) and
 * starts in a fraction of the time. Plain JavaScript: `pnpm start` and `pnpm ctxo` run it with
 * node alone.
 *
 * A bundle is stale when a file it is made of is newer: the app's and every workspace package's
 * `src/` and `package.json`, the tsconfig files, the lockfile and this file. It is written whole
 * (a temporary file, then a rename), so a process starting meanwhile never reads half of one, and
 * it carries the time of the newest source read before the build, so a file saved during the build
 * makes the next start build again. Without esbuild (a production install) or a writable `dist/`,
 * an existing bundle is run as it is, with a warning.
 *
 * `ensureBuilt` is the same rule for any build output (the workbench page, `apps/web/dist`, built
 * by Vite): built again when a file it is made of is newer than the output's stamp file.
 *
 * `pnpm start` builds apart (`apart`): in a process of its own, `node <app>/build.mjs`. Built in the
 * gateway's process, Vite's module graph stayed in its heap (590 MB in use after a start that built
 * the page, against 35) and esbuild's service ran beside it as long as it did (200 MB more).
 */

import { spawn } from "node:child_process"
import {
  existsSync,
  mkdirSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync
} from "node:fs"
import { basename, dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"

const here = fileURLToPath(import.meta.url)
const root = join(dirname(here), "..")

/**
 * esbuild's options for ctxo's code as the apps run it (also `scripts/paired.mjs`'s): one ESM file
 * for Node 20 with `require` available, `banner` first (a shebang, for a bin).
 */
export const nodeBundle = (banner = "") => ({
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
  }
})

/**
 * Builds `entry` into `outfile` (and its source map), with `banner` first (a shebang, for a bin).
 * A module the code imports dynamically (`import("./x.ts")`) is a chunk beside it
 * (`chunk-<name>-<hash>.js`, as is code such a chunk shares with the entry), loaded only when it is
 * first imported: what a start does not need (the gateway's 3.4 MB API reference page) is not parsed
 * at start. Chunks sit in the entry's folder, so `import.meta.url` paths resolve as from the entry.
 */
export const bundle = async ({ entry, outfile, banner = "" }) => {
  const { build } = await import("esbuild")
  const outdir = dirname(outfile)
  const result = await build({
    ...nodeBundle(banner),
    entryPoints: [entry],
    outdir,
    entryNames: basename(outfile).replace(/\.js$/, ""),
    chunkNames: "chunk-[name]-[hash]",
    splitting: true,
    sourcemap: "linked",
    write: false,
    logLevel: "warning"
  })
  // Chunks and maps first, the entry last: each whole, by rename; then the chunks of earlier
  // builds go (a start meanwhile runs the new entry, whose chunks are all in place).
  const files = [
    ...result.outputFiles.filter((f) => f.path !== outfile),
    ...result.outputFiles.filter((f) => f.path === outfile)
  ]
  mkdirSync(outdir, { recursive: true })
  for (const file of files) {
    const temporary = `${file.path}.${process.pid}.tmp`
    writeFileSync(temporary, file.contents)
    renameSync(temporary, file.path)
  }
  const written = new Set(files.map((f) => basename(f.path)))
  for (const name of readdirSync(outdir))
    if (/^chunk-.*\.js(\.map)?$/.test(name) && !written.has(name)) rmSync(join(outdir, name), { force: true })
}

/** The newest modification time of the files under `dir` (0 when it does not exist). */
const newest = (dir) => {
  if (!existsSync(dir)) return 0
  let latest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true }))
    if (entry.isFile()) latest = Math.max(latest, statSync(join(entry.parentPath, entry.name)).mtimeMs)
  return latest
}
const mtime = (file) => (existsSync(file) ? statSync(file).mtimeMs : 0)

/** When the files a bundle is made of last changed (0 for those a deployment does not ship). */
const sourcesChangedAt = (app, files = [], only = undefined) => {
  const packages = only ?? (existsSync(join(root, "packages")) ? readdirSync(join(root, "packages")) : [])
  return Math.max(
    newest(join(app, "src")),
    mtime(join(app, "package.json")),
    mtime(join(app, "tsconfig.json")),
    ...packages.flatMap((p) => [
      newest(join(root, "packages", p, "src")),
      mtime(join(root, "packages", p, "package.json")),
      mtime(join(root, "packages", p, "tsconfig.json"))
    ]),
    mtime(join(root, "tsconfig.base.json")),
    mtime(join(root, "pnpm-lock.yaml")),
    mtime(here),
    ...files.map((f) => mtime(join(app, f)))
  )
}

/**
 * Runs `build` unless `outfile` is newer than every file the output is made of (the app's `src/`,
 * `package.json` and tsconfig, `files` of the app, the sources of `packages` (default: every
 * package's), the lockfile, this file;
 * a walk of the `src/` folders, a few milliseconds); says so on stderr when it builds. Resolves to
 * whether it built. A build that cannot run (its tools missing, the folder not writable) leaves an
 * existing output to use, with a warning. `outfile` then carries the time of the sources read
 * before the build, so a file saved during it makes the next start build again.
 */
export const ensureBuilt = async ({ app, outfile, build, files = [], packages = undefined }) => {
  const changedAt = sourcesChangedAt(app, files, packages)
  if (existsSync(outfile) && statSync(outfile).mtimeMs >= changedAt) return false
  const shown = outfile.slice(root.length + 1)
  const started = performance.now()
  try {
    await build()
  } catch (e) {
    if (!existsSync(outfile)) throw e
    console.error(
      `ctxo: ${shown} is older than its sources and could not be built again, so it runs as it is (${e.message})`
    )
    return false
  }
  // Rounded up to the millisecond a Date holds.
  const at = new Date(Math.ceil(changedAt))
  utimesSync(outfile, at, at)
  console.error(`ctxo: built ${shown} in ${Math.round(performance.now() - started)} ms`)
  return true
}

/**
 * A `build` for `ensureBuilt` that runs `node <script>` and waits for it (its output on this
 * process's stderr): nothing the build loads stays in this process. It fails with the script and
 * how it ended when it does not end with 0.
 */
export const buildApart = (script) => () =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script], { stdio: ["ignore", "inherit", "inherit"] })
    child.once("error", reject)
    child.once("exit", (code, signal) =>
      code === 0
        ? resolve()
        : reject(
            new Error(`node ${relative(process.cwd(), script)} ended with ${signal ?? `exit code ${code}`}`)
          )
    )
  })

/**
 * Builds the bundle unless it is newer than every file it is made of (`ensureBuilt`); `apart`: by
 * `node <script>` in a process of its own (`buildApart`), the script building `options` itself.
 */
export const ensureBundle = (options, apart = undefined) =>
  ensureBuilt({
    app:
      basename(dirname(options.entry)) === "src" ? dirname(dirname(options.entry)) : dirname(options.entry),
    outfile: options.outfile,
    build: apart === undefined ? () => bundle(options) : buildApart(apart.script)
  })
