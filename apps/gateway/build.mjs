/**
 * The gateway's bundle, `dist/main.js`: what `pnpm start` runs (see `scripts/bundle.mjs`).
 * `node build.mjs` builds it; `ensureBuilt()` builds it when its sources changed.
 */
import { fileURLToPath } from "node:url"
import { bundle, ensureBundle } from "../../scripts/bundle.mjs"

const options = {
  entry: fileURLToPath(new URL("./src/main.ts", import.meta.url)),
  outfile: fileURLToPath(new URL("./dist/main.js", import.meta.url))
}
export const outfile = options.outfile
export const ensureBuilt = () => ensureBundle(options)

if (process.argv[1] === fileURLToPath(import.meta.url)) await bundle(options)
