/**
 * `pnpm start`: builds the gateway's bundle and the workbench page when their sources changed (see
 * `build.mjs` and `../web/build.mjs`; each build in a process of its own), then runs the gateway in
 * this process; it serves the page at `/`. `node --import tsx/esm src/main.ts` runs the same gateway from its sources.
 */

import { pathToFileURL } from "node:url"
import { ensureBuilt as ensurePage } from "../web/build.mjs"
import { ensureBuilt, outfile } from "./build.mjs"

// Both checked at once (each walks its sources' times), and built apart, each in a process of its
// own: what Vite and esbuild load would stay in the gateway's (`scripts/bundle.mjs`). A page that
// cannot be built leaves the gateway to start: `/` then says how to build it.
await Promise.all([
  ensureBuilt({ apart: true }),
  ensurePage({ apart: true }).catch((e) =>
    console.error(`ctxo: the workbench page could not be built (${e.message})`)
  )
])
await import(pathToFileURL(outfile).href)
