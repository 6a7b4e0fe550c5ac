/**
 * `pnpm ctxo`: builds the CLI's bundle when its sources changed (see `build.mjs`), then runs it in
 * this process with the arguments given. `node --import tsx/esm src/main.ts` runs the same CLI from
 * its sources.
 */
import { pathToFileURL } from "node:url"
import { ensureBuilt, outfile } from "./build.mjs"

await ensureBuilt()
await import(pathToFileURL(outfile).href)
