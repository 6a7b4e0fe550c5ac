/**
 * `pnpm start` builds what is stale apart, each build in a process of its own (`buildApart` in
 * `scripts/bundle.mjs`): built in the gateway's process, Vite's module graph stayed in its heap and
 * esbuild's service ran beside it for as long as it did. Here on an app of a few files: the build
 * runs in another process, which is gone once it is done; a build that fails says which and how.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it, vi } from "vitest"
import { buildApart, ensureBuilt } from "../../../scripts/bundle.mjs"

const folder = mkdtempSync(join(tmpdir(), "ctxo-build-apart-"))
afterAll(() => rmSync(folder, { recursive: true, force: true }))

/** An app whose build writes its output with the pid of the process that built it. */
const app = (name: string, script: string) => {
  const dir = join(folder, name)
  mkdirSync(join(dir, "src"), { recursive: true })
  writeFileSync(join(dir, "src", "main.ts"), "export const x = 1\n")
  const outfile = join(dir, "dist", "out.txt")
  writeFileSync(join(dir, "build.mjs"), script.replaceAll("OUTFILE", JSON.stringify(outfile)))
  return { dir, outfile, build: buildApart(join(dir, "build.mjs")) }
}
const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe("a build apart", () => {
  it("runs in a process of its own, gone once the output is written, and only when the sources are newer", async () => {
    const { dir, outfile, build } = app(
      "ok",
      [
        'import { mkdirSync, writeFileSync } from "node:fs"',
        'import { dirname } from "node:path"',
        "mkdirSync(dirname(OUTFILE), { recursive: true })",
        "writeFileSync(OUTFILE, String(process.pid))"
      ].join("\n")
    )
    const options = { app: dir, outfile, build, packages: [] }
    expect(await ensureBuilt(options)).toBe(true)
    const pid = Number(readFileSync(outfile, "utf8"))
    expect(pid).not.toBe(process.pid)
    expect(alive(pid)).toBe(false)
    // Fresh: nothing runs.
    expect(await ensureBuilt(options)).toBe(false)
    expect(Number(readFileSync(outfile, "utf8"))).toBe(pid)
    // A source saved since: built again, by another process.
    const later = new Date(Date.now() + 5_000)
    utimesSync(join(dir, "src", "main.ts"), later, later)
    expect(await ensureBuilt(options)).toBe(true)
    expect(Number(readFileSync(outfile, "utf8"))).not.toBe(pid)
  })

  it("that fails says which script and how it ended; an older output is then run as it is", async () => {
    const { dir, outfile, build } = app("failing", 'console.error("no bundler here")\nprocess.exit(3)')
    const options = { app: dir, outfile, build, packages: [] }
    const stderr = vi.spyOn(console, "error").mockImplementation(() => {})
    try {
      await expect(ensureBuilt(options)).rejects.toThrow(/build\.mjs ended with exit code 3$/)
      expect(existsSync(outfile)).toBe(false)
      mkdirSync(join(dir, "dist"))
      writeFileSync(outfile, "old")
      utimesSync(outfile, new Date(0), new Date(0))
      expect(await ensureBuilt(options)).toBe(false)
      expect(readFileSync(outfile, "utf8")).toBe("old")
      expect(stderr.mock.calls.flat().join("\n")).toMatch(/could not be built again, so it runs as it is/)
    } finally {
      stderr.mockRestore()
    }
  })
})
