/**
 * The bundle `pnpm start` runs (`dist/main.js` and the chunks beside it): what a gateway on the file
 * store parses at start. The PostgreSQL store and its driver, the OpenTelemetry SDK, the openai SDK
 * (summaries and embeddings) and RE2 (the search tool) are chunks of their own, loaded when a
 * configuration or a first call asks for them (together a fifth of a second of parsing and
 * evaluation at start on this machine), and so is undici (the upstream's connection pool, a
 * megabyte: 80-90 ms of a start here). A static import of any of them from the start's modules
 * fails this test, naming the file; and the bundle, started, answers a model call through the pool
 * it loads then.
 */
import { existsSync, readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { ensureBuilt, outfile } from "../build.mjs"
import { spawnGateway } from "./spawned.ts"

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
  "re2js",
  "undici"
]

describe("the gateway's bundle", () => {
  it("parses no PostgreSQL driver, OpenTelemetry SDK, openai SDK, RE2 or undici at start", () => {
    const start = loadedWith(outfile)
    const found = start.flatMap((file) =>
      [...packagesIn(file)].filter((p) => lazy.includes(p)).map((p) => `${p} in ${file.split("/").pop()}`)
    )
    expect(found).toEqual([])
    // The start is still the whole gateway: the effect runtime and its HTTP server are in it.
    const all = new Set(start.flatMap((file) => [...packagesIn(file)]))
    expect(all.has("effect")).toBe(true)
    expect(all.has("@effect/platform-node")).toBe(true)
  })

  it("has each of them in a chunk loaded on demand, beside the entry", () => {
    const demand = loadedOnDemand(loadedWith(outfile))
    for (const file of demand) expect(existsSync(file), file).toBe(true)
    // A chunk loaded on demand brings its own static imports with it.
    const packages = new Set(demand.flatMap(loadedWith).flatMap((file) => [...packagesIn(file)]))
    expect(lazy.filter((p) => !packages.has(p))).toEqual([])
  })

  it("answers a model call, JSON and streamed, through the pool it loads at the first call, under the V8 flags it set", async () => {
    const gateway = await spawnGateway({ entry: outfile, env: { CTXO_UPSTREAM_TIMEOUT_MS: "15000" } })
    try {
      const call = (stream: boolean) =>
        fetch(`${gateway.baseUrl}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "gpt-4o", stream, messages: [{ role: "user", content: "hi" }] }),
          signal: AbortSignal.timeout(30_000)
        })
      // Both at once: the second call waits for the pool the first one is loading.
      const [json, streamed] = await Promise.all([call(false), call(true)])
      const answer = (await json.json()) as { choices?: ReadonlyArray<{ message?: { content?: string } }> }
      expect(json.status, JSON.stringify(answer)).toBe(200)
      expect(answer.choices?.[0]?.message?.content).toContain("local model")
      expect(streamed.status).toBe(200)
      expect(await streamed.text()).toContain("data: [DONE]")
      // The V8 flags it set at its start, before its layers allocated (V8Tuning).
      expect(gateway.output()).toContain(
        "V8 flags: --heap-growing-percent=50 --no-allocation-site-pretenuring"
      )
    } finally {
      await gateway.stop()
    }
  }, 120_000)
})
