/**
 * The workbench page, `dist/` (index.html and hashed assets), built by Vite (`vite.config.ts`).
 * `node build.mjs` builds it (`pnpm --filter @ctxo/web build`, turbo's `build`); `ensureBuilt()`
 * builds it when its sources changed, the rule `pnpm start` applies to the gateway's bundle
 * (`scripts/bundle.mjs`), and `pnpm start` calls it. The new page is built beside the old one and
 * moved in place, so the gateway never serves half of one.
 */
import { existsSync, renameSync, rmSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { buildApart, ensureBuilt as ensureFresh } from "../../scripts/bundle.mjs"

const app = fileURLToPath(new URL(".", import.meta.url))
export const dist = join(app, "dist")
/** The file whose time says when the page was built. */
export const outfile = join(dist, "index.html")

export const build = async () => {
  const { build: vite } = await import("vite")
  const temporary = join(app, `.dist-${process.pid}`)
  rmSync(temporary, { recursive: true, force: true })
  try {
    await vite({
      root: app,
      configFile: join(app, "vite.config.ts"),
      logLevel: "warn",
      build: { outDir: temporary, emptyOutDir: true }
    })
    const old = join(app, `.dist-old-${process.pid}`)
    if (existsSync(dist)) renameSync(dist, old)
    renameSync(temporary, dist)
    rmSync(old, { recursive: true, force: true })
  } finally {
    rmSync(temporary, { recursive: true, force: true })
  }
}

/**
 * Builds the page when a file it is made of is newer than its index.html; resolves to whether it
 * built. `apart`: by `node build.mjs` in a process of its own (what `pnpm start` does).
 */
export const ensureBuilt = ({ apart = false } = {}) =>
  ensureFresh({
    app,
    outfile,
    build: apart ? buildApart(fileURLToPath(import.meta.url)) : build,
    files: ["index.html", "vite.config.ts", "build.mjs"],
    // The packages the page imports (the rest cannot change it).
    packages: ["api", "client", "history", "budget", "store", "blocks"]
  })

if (process.argv[1] === fileURLToPath(import.meta.url)) await build()
