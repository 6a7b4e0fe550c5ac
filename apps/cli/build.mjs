/**
 * The CLI's bundle, `dist/ctxo.js`: the package's `bin`, what `pnpm ctxo` runs, and what the tests
 * run (see `scripts/bundle.mjs`). `node build.mjs` builds it; `ensureBuilt()` builds it when its
 * sources changed.
 */
import { fileURLToPath } from "node:url"
import { bundle, ensureBundle } from "../../scripts/bundle.mjs"

const options = {
  entry: fileURLToPath(new URL("./src/main.ts", import.meta.url)),
  outfile: fileURLToPath(new URL("./dist/ctxo.js", import.meta.url)),
  banner: "#!/usr/bin/env node\n"
}
export const outfile = options.outfile
export const buildCli = () => bundle(options)
export const ensureBuilt = () => ensureBundle(options)

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildCli()
