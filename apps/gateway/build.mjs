/**
 * The gateway's bundle, `dist/main.js`: what `pnpm start` runs (see `scripts/bundle.mjs`).
 * `node build.mjs` builds it; `ensureBuilt()` builds it when its sources changed (here, or apart).
 */
import { fileURLToPath } from "node:url"
import { bundle, ensureBundle } from "../../scripts/bundle.mjs"

const options = {
  entry: fileURLToPath(new URL("./src/main.ts", import.meta.url)),
  outfile: fileURLToPath(new URL("./dist/main.js", import.meta.url))
}
export const outfile = options.outfile
/** `apart`: built by `node build.mjs` in a process of its own (what `pnpm start` does). */
export const ensureBuilt = ({ apart = false } = {}) =>
  ensureBundle(options, apart ? { script: fileURLToPath(import.meta.url) } : undefined)

if (process.argv[1] === fileURLToPath(import.meta.url)) await bundle(options)
