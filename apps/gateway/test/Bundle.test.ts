/**
 * The bundle `pnpm start` runs (`dist/main.js` and the chunks beside it): what a gateway on the file
 * store parses at start. The PostgreSQL store and its driver, the OpenTelemetry SDK, the openai SDK
 * (summaries and embeddings) and RE2 (the search tool) are chunks of their own, loaded when a
 * configuration or a first call asks for them (each is a fifth of a second of parsing and
 * evaluation at start on this machine, together). A static import of any of them from the start's
 * modules fails this test, naming the file.
 */
import { existsSync, readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { ensureBuilt, outfile } from "../build.mjs"

beforeAll(async () => {
  await ensureBuilt()
}, 120_000)

/** The files loading `entry` loads: it and every chunk it imports statically, transitively. */
const loadedWith = (entry: string) => {
  const seen = new Set<string>()
  const visit = (file: string) => {
    if (seen.has(file)) return
    seen.add(file)
    const text = readFileSync(file, "utf8")
    for (const m of text.matchAll(/(?:from\s*|^import\s*)"(\.\/chunk-[^"]+\.js)"/gm))
      visit(join(dirname(file), m[1]!))
  }
  visit(entry)
  return [...seen]
}

/** The chunks only a dynamic `import()` names. */
const loadedOnDemand = (start: ReadonlyArray<string>) => {
  const names = new Set<string>()
  for (const file of start)
    for (const m of readFileSync(file, "utf8").matchAll(/import\("(\.\/chunk-[^"]+\.js)"\)/g))
      names.add(join(dirname(file), m[1]!))
  return [...names].filter((f) => !start.includes(f))
}

/** The packages a bundle file is made of, from esbuild's `// path` comments. */
const packagesIn = (file: string) =>
  new Set(
    [
      ...readFileSync(file, "utf8").matchAll(
        /^\/\/ \S*node_modules\/\.pnpm\/[^/]+\/node_modules\/((?:@[^/]+\/)?[^/]+)\//gm
      )
    ].map((m) => m[1]!)
  )

const lazy = [
  "pg",
  "@effect/sql-pg",
  "@opentelemetry/sdk-trace-base",
  "@opentelemetry/exporter-trace-otlp-http",
  "openai",
  "re2js"
]

describe("the gateway's bundle", () => {
  it("parses no PostgreSQL driver, OpenTelemetry SDK, openai SDK or RE2 at start", () => {
    const start = loadedWith(outfile)
    const found = start.flatMap((file) =>
      [...packagesIn(file)].filter((p) => lazy.includes(p)).map((p) => `${p} in ${file.split("/").pop()}`)
    )
    expect(found).toEqual([])
    // The start is still the whole gateway: the effect runtime and the upstream client are in it.
    const all = new Set(start.flatMap((file) => [...packagesIn(file)]))
    expect(all.has("effect")).toBe(true)
    expect(all.has("undici")).toBe(true)
  })

  it("has each of them in a chunk loaded on demand, beside the entry", () => {
    const demand = loadedOnDemand(loadedWith(outfile))
    for (const file of demand) expect(existsSync(file), file).toBe(true)
    // A chunk loaded on demand brings its own static imports with it.
    const packages = new Set(demand.flatMap(loadedWith).flatMap((file) => [...packagesIn(file)]))
    expect(lazy.filter((p) => !packages.has(p))).toEqual([])
  })
})
