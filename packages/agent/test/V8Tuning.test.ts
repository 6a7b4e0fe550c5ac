/**
 * The V8 flags the gateway sets at its start (`V8Tuning`): which ones its settings give, and that
 * setting them in a running process does turn V8's allocation-site pretenuring off (a flag set too
 * late, or one a Node version froze, would leave it on without a word).
 */
import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as V8Tuning from "../src/V8Tuning.ts"

const folder = mkdtempSync(join(tmpdir(), "ctxo-v8-tuning-"))
afterAll(() => rmSync(folder, { recursive: true, force: true }))

/**
 * A process that applies the settings (or none), then keeps objects of two allocation sites alive
 * across scavenges, as V8 pretenures; the lines V8 writes of its pretenuring statistics. The trace is
 * turned on by the script itself, after the settings: tsx's loader thread is an isolate of its own,
 * whose collections while it compiles the script would print lines of their own.
 */
const pretenuringTrace = (settings: V8Tuning.Settings | undefined) => {
  const script = join(folder, "keep.mts")
  const tuning = pathToFileURL(fileURLToPath(new URL("../src/V8Tuning.ts", import.meta.url))).href
  writeFileSync(
    script,
    [
      'import { setFlagsFromString } from "node:v8"',
      `import * as V8Tuning from ${JSON.stringify(tuning)}`,
      `const settings = ${JSON.stringify(settings ?? null)}`,
      "if (settings !== null) V8Tuning.apply(settings)",
      'setFlagsFromString("--trace-pretenuring-statistics")',
      "const keep: Array<unknown> = []",
      "for (let i = 0; i < 400_000; i++) keep.push({ a: i, b: [i, i] })",
      "console.log('kept', keep.length)"
    ].join("\n")
  )
  const run = spawnSync(process.execPath, ["--import", "tsx/esm", script], {
    cwd: fileURLToPath(new URL("..", import.meta.url)),
    encoding: "utf8",
    timeout: 30_000
  })
  expect(run.status, `${run.error ?? ""} ${run.signal ?? ""} ${run.stderr}`).toBe(0)
  expect(run.stdout).toContain("kept 400000")
  return run.stdout.split("\n").filter((line) => line.includes("pretenuring:"))
}

describe("V8Tuning", () => {
  it("gives the heap's growth and allocation-site pretenuring off by default, and leaves V8's own when asked", () => {
    expect(V8Tuning.flagsOf()).toEqual([
      `--heap-growing-percent=${V8Tuning.DEFAULT_HEAP_GROWING_PERCENT}`,
      "--no-allocation-site-pretenuring"
    ])
    expect(V8Tuning.flagsOf({ heapGrowingPercent: 120, allocationSitePretenuring: false })).toEqual([
      "--heap-growing-percent=120",
      "--no-allocation-site-pretenuring"
    ])
    expect(V8Tuning.flagsOf({ heapGrowingPercent: 0, allocationSitePretenuring: true })).toEqual([])
  })

  it("turns V8's pretenuring off in the process that applies it, where V8 gathers its statistics otherwise", () => {
    // The control: V8's default gathers statistics on both sites (their objects all survive), on
    // which it decides to tenure them.
    expect(pretenuringTrace(undefined).some((line) => line.includes("AllocationSite"))).toBe(true)
    // Applied at the start, as the gateway does: nothing gathered, nothing decided.
    expect(pretenuringTrace({})).toEqual([])
  }, 60_000)
})
