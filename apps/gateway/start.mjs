/**
 * `pnpm start`: builds the gateway's bundle when its sources changed (see `build.mjs`), then runs
 * it in this process. `node --import tsx/esm src/main.ts` runs the same gateway from its sources.
 */

import { pathToFileURL } from "node:url"
import { ensureBuilt, outfile } from "./build.mjs"

await ensureBuilt()
await import(pathToFileURL(outfile).href)
