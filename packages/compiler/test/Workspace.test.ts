import { mkdirSync, mkdtempSync, rmSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Workspace from "../src/Workspace.ts"

// One workspace instance across reads, as a gateway keeps it: its caches must never serve a stale
// text, a removed file, or a file a swapped-in symlink leads to.
const temps: Array<string> = []
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  temps.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true })
})
const setup = () => {
  const root = tempDir("ctxo-ws-")
  mkdirSync(join(root, "s1", "docs"), { recursive: true })
  writeFileSync(join(root, "s1", "notes.md"), "# Notes\nfirst\n")
  writeFileSync(join(root, "s1", "docs", "a.md"), "# A\n")
  return { root, ws: Workspace.make(root) }
}
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const later = (path: string, seconds: number) =>
  utimesSync(path, new Date(), new Date(Date.now() + seconds * 1000))

describe("Workspace caches", () => {
  it("reads a changed file again, even at the same size", async () => {
    const { root, ws } = setup()
    expect(await run(ws.read("session", "s1", "notes.md"))).toBe("# Notes\nfirst\n")
    writeFileSync(join(root, "s1", "notes.md"), "# Notes\nfixed\n")
    later(join(root, "s1", "notes.md"), 5)
    expect(await run(ws.read("session", "s1", "notes.md"))).toBe("# Notes\nfixed\n")
    unlinkSync(join(root, "s1", "notes.md"))
    expect(await run(ws.read("session", "s1", "notes.md"))).toBeUndefined()
  })

  it("refuses a file that was read before and is now a symlink out of the session", async () => {
    const { root, ws } = setup()
    const outside = tempDir("ctxo-ws-outside-")
    writeFileSync(join(outside, "secret.md"), "token=abc\n")
    expect(await run(ws.read("session", "s1", "notes.md"))).toContain("first")
    rmSync(join(root, "s1", "notes.md"))
    symlinkSync(join(outside, "secret.md"), join(root, "s1", "notes.md"))
    const error = await run(Effect.flip(ws.read("session", "s1", "notes.md")))
    expect(error.kind).toBe("outside-sandbox")
  })

  it("lists files added and removed since the last listing, in subdirectories too", async () => {
    const { root, ws } = setup()
    expect(await run(ws.list("session", "s1"))).toEqual(["docs/a.md", "notes.md"])
    writeFileSync(join(root, "s1", "docs", "b.md"), "# B\n")
    mkdirSync(join(root, "s1", "docs", "deep"))
    writeFileSync(join(root, "s1", "docs", "deep", "c.md"), "# C\n")
    expect(await run(ws.list("session", "s1"))).toEqual([
      "docs/a.md",
      "docs/b.md",
      "docs/deep/c.md",
      "notes.md"
    ])
    unlinkSync(join(root, "s1", "docs", "a.md"))
    expect(await run(ws.list("session", "s1"))).toEqual(["docs/b.md", "docs/deep/c.md", "notes.md"])
  })

  it("reads many files in order, the cached and the new alike", async () => {
    const { root, ws } = setup()
    await run(ws.read("session", "s1", "notes.md"))
    writeFileSync(join(root, "s1", "docs", "b.md"), "# B\n")
    expect(
      await run(ws.readMany("session", "s1", ["docs/b.md", "missing.md", "notes.md", "docs/a.md"]))
    ).toEqual(["# B\n", undefined, "# Notes\nfirst\n", "# A\n"])
  })
})

describe("Workspace in memory", () => {
  const ws = Workspace.makeMemory({
    global: { "system-prompt.md": "You are ctxo." },
    sessions: { s1: { "notes.md": "# Notes\n", "docs/a.md": "# A\n" } }
  })
  it("reads, lists and checks paths like the disk workspace", async () => {
    expect(await run(ws.hasSession("s1"))).toBe(true)
    expect(await run(ws.hasSession("s2"))).toBe(false)
    expect(await run(ws.read("global", "s1", "system-prompt.md"))).toBe("You are ctxo.")
    expect(await run(ws.readMany("session", "s1", ["docs/a.md", "nope.md"]))).toEqual(["# A\n", undefined])
    expect(await run(ws.list("session", "s1"))).toEqual(["docs/a.md", "notes.md"])
    const outside = await run(Effect.flip(ws.read("session", "s1", "../s2/x.md")))
    expect(outside.kind).toBe("outside-sandbox")
    const session = await run(Effect.flip(ws.hasSession("../s1")))
    expect(session._tag).toBe("UnresolvedReference")
  })
})
