/**
 * Bundles the CLI into one ESM file, `dist/ctxo.js` (the package's `bin`). Used by `pnpm build`
 * and by the tests, which run the bundle a user gets.
 */

import { fileURLToPath } from "node:url"
import { build } from "esbuild"

export const outfile = fileURLToPath(new URL("./dist/ctxo.js", import.meta.url))

export const buildCli = () =>
  build({
    entryPoints: [fileURLToPath(new URL("./src/main.ts", import.meta.url))],
    outfile,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "esm",
    // Prefer packages' ESM builds: some UMD builds (jsonc-parser) hide their requires from bundlers.
    mainFields: ["module", "main"],
    // Loaded at run time from node_modules: tiktoken reads its WASM file beside it, and the
    // encodings of gpt-tokenizer are required lazily, only for the encodings a run needs.
    external: ["tiktoken", "gpt-tokenizer", "gpt-tokenizer/*"],
    banner: {
      js: "#!/usr/bin/env node\nimport { createRequire as __ctxoRequire } from 'node:module'; const require = __ctxoRequire(import.meta.url);"
    },
    logLevel: "warning"
  })

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildCli()
