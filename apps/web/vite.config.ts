/**
 * The workbench page's build: React through esbuild's automatic JSX (no Babel, no dev refresh), one
 * hashed script and stylesheet under `assets/`. A browser page must not pull Node code: a Node
 * module anywhere in the page's imports fails the build, naming the module and who imported it.
 */
import { builtinModules } from "node:module"
import { defineConfig, type Plugin } from "vite"

const nodeModules = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]))

const noNodeModules: Plugin = {
  name: "ctxo:no-node-modules",
  enforce: "pre",
  resolveId(id, importer) {
    if (id.startsWith("node:") || nodeModules.has(id))
      this.error(`${id} is a Node module, imported by ${importer ?? "the page"}: the page runs in a browser`)
    return null
  }
}

export default defineConfig({
  plugins: [noNodeModules],
  esbuild: { jsx: "automatic" },
  build: {
    target: "es2022",
    sourcemap: true,
    chunkSizeWarningLimit: 2000,
    rollupOptions: {
      // Mantine marks its modules "use client" for React Server Components; a page has no server part.
      onwarn(warning, warn) {
        // (and cannot map the position of the directive it drops).
        if (warning.code === "MODULE_LEVEL_DIRECTIVE" || warning.code === "SOURCEMAP_ERROR") return
        warn(warning)
      }
    }
  },
  // Effect's and the contract's modules are plain ESM: nothing to pre-bundle for a build.
  logLevel: "warn"
})
