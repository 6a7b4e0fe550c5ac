/**
 * The data root's edges: reserved and over-long names, what a session may reach (its own files and
 * the global files, never another session's or the index), who may write control files, deleted
 * sessions staying gone, temporary files cleaned at start-up, no absolute path in an error, and
 * symlinks swapped in while reads and writes run.
 */
import { spawn } from "node:child_process"
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Store from "../src/Store.ts"

const temps: Array<string> = []
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  temps.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true })
})
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const fail = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(Effect.flip(effect))

const setup = async () => {
  const root = tempDir("ctxo-sandbox-")
  writeFileSync(join(root, "profile.md"), "# Profile\n")
  writeFileSync(join(root, "system-prompt.md"), "You help.\n")
  const store = Store.makeUnsafe(root)
  await run(store.createSession({ id: "a", concept: "" }))
  await run(store.createSession({ id: "b", concept: "" }))
  await run(store.writeFile("b", "notes.md", "b's notes\n"))
  return { root, store }
}

describe("Store sandbox", () => {
  it("refuses reserved and over-long names with a clear PathRefused, never a 500", async () => {
    const { store } = await setup()
    for (const id of [
      "sessions.json",
      "profile.md",
      "system-prompt.md",
      "tenants",
      ".hidden",
      "-x",
      "a/b",
      "x".repeat(129)
    ]) {
      const error = await fail(store.createSession({ id, concept: "" }))
      expect([id, error._tag]).toEqual([id, "PathRefused"])
    }
    const long = await fail(store.writeFile("a", `${"é".repeat(200)}.md`, "x"))
    expect(long).toMatchObject({ _tag: "PathRefused", reason: expect.stringContaining("255 bytes") })
    expect(long.message.length).toBeLessThan(300)
    for (const bad of ["%2e%2e/b/notes.md", "~/x", "..\\b\\notes.md"])
      expect((await fail(store.readFile("a", bad)))._tag).toBe("PathRefused")
  })

  it("lets a session reach its own files and the global files, never another session's or the index", async () => {
    const { root, store } = await setup()
    expect((await run(store.readFile(undefined, "profile.md"))).content).toBe("# Profile\n")
    for (const path of ["b/notes.md", "sessions.json", "b/messages.json", "../a/x"])
      expect([path, (await fail(store.readFile(undefined, path)))._tag]).toEqual([path, "PathRefused"])
    expect(await run(store.read("global", "a", "b/notes.md").pipe(Effect.either))).toMatchObject({
      _tag: "Left",
      left: { _tag: "PathRefused" }
    })
    // A link to a global file is followed; a link into another session or to the index is not.
    symlinkSync(join(root, "profile.md"), join(root, "a", "me.md"))
    symlinkSync(join(root, "b", "notes.md"), join(root, "a", "theirs.md"))
    symlinkSync(join(root, "sessions.json"), join(root, "a", "index.json"))
    expect((await run(store.readFile("a", "me.md"))).content).toBe("# Profile\n")
    expect((await fail(store.readFile("a", "theirs.md")))._tag).toBe("PathRefused")
    expect((await fail(store.readFile("a", "index.json")))._tag).toBe("PathRefused")
    expect((await run(store.list("session", "a"))).includes("theirs.md")).toBe(false)
  })

  it("keeps control files from the model's tools and history files from everyone but the recorder", async () => {
    const { store } = await setup()
    const model = await fail(store.writeFile("a", "context-config.json", "{}", { actor: "model" }))
    expect(model).toMatchObject({ _tag: "PathRefused", reason: expect.stringContaining("control files") })
    await run(store.writeFile("a", "context-config.json", "{}", { actor: "model", allowControlFiles: true }))
    await run(store.writeFile("a", "context-config.json", "{}"))
    for (const path of ["messages.json", "tool-results/x.json"])
      expect((await fail(store.writeFile("a", path, "[]")))._tag).toBe("PathRefused")
    expect(await run(store.writeToolResult("a", "call 1/../x", "{}"))).toBe("tool-results/call_1_.._x.json")
  })

  it("never writes a deleted session back; a new one with the same id starts empty", async () => {
    const { root, store } = await setup()
    await run(store.writeHistory("a", '{"format":"ctxo.history/v1","messages":[],"compression":[]}'))
    await run(store.deleteSession("a"))
    expect((await fail(store.writeHistory("a", "[]")))._tag).toBe("SessionNotFound")
    expect((await fail(store.writeToolResult("a", "c1", "{}")))._tag).toBe("SessionNotFound")
    expect(existsSync(join(root, "a"))).toBe(false)
    // A folder left behind (a crash after the index was written) is not inherited.
    mkdirSync(join(root, "a"))
    writeFileSync(join(root, "a", "messages.json"), "old")
    await run(store.createSession({ id: "a", concept: "again" }))
    expect(await run(store.readHistory("a"))).toBeUndefined()
    expect(readdirSync(join(root, "a"))).toEqual([])
  })

  it("waits for a session's lock before deleting it, and lets the holder's own writes through", async () => {
    const { store } = await setup()
    const order: Array<string> = []
    await run(
      Effect.all(
        [
          store.withSessionLock(
            "a",
            Effect.gen(function* () {
              yield* Effect.sleep("20 millis")
              yield* store.writeHistory("a", "[]") // re-entrant: the turn's own write
              order.push("turn")
            })
          ),
          Effect.zipRight(Effect.sleep("5 millis"), store.deleteSession("a")).pipe(
            Effect.tap(() => Effect.sync(() => order.push("delete")))
          )
        ],
        { concurrency: "unbounded" }
      )
    )
    expect(order).toEqual(["turn", "delete"])
  })

  it("removes temporary files that interrupted writes left, and lists none", async () => {
    const { root, store } = await setup()
    writeFileSync(join(root, "a", ".notes.md.123.4.ctxo-tmp"), "half")
    writeFileSync(join(root, ".sessions.json.99.1700000000000.3.tmp"), "half")
    writeFileSync(join(root, "a", "keep.md"), "x")
    expect(await run(store.list("session", "a"))).toEqual(["keep.md"])
    expect(await run(store.cleanTemporaryFiles)).toBe(2)
    expect(readdirSync(join(root, "a"))).toEqual(["keep.md"])
  })

  it("names files relative to the data root in errors, never by their absolute path", async () => {
    const { root, store } = await setup()
    mkdirSync(join(root, "a", "dir.md"))
    const errors = [
      await fail(store.readFile("a", "missing.md")),
      await fail(store.readFile("a", "dir.md")),
      await fail(store.getSession("zzz"))
    ]
    for (const e of errors) expect(e.message).not.toContain(root)
  })

  it("follows no symlink swapped in while reads and writes run: nothing outside is read or written", async () => {
    const { root, store } = await setup()
    const outside = tempDir("ctxo-outside-")
    writeFileSync(join(outside, "a.md"), "SECRET\n")
    const inside = join(root, "a", "docs-real")
    mkdirSync(inside)
    writeFileSync(join(inside, "a.md"), "inside\n")
    const link = join(root, "a", "docs")
    symlinkSync(inside, link)
    // Another process points `docs` in and out of the session, atomically, as fast as it can.
    const swapper = spawn(
      process.execPath,
      [
        "-e",
        `const fs = require("fs");
         const [link, inside, outside] = process.argv.slice(1);
         const end = Date.now() + 4000;
         for (let i = 0; Date.now() < end; i++) {
           try { fs.symlinkSync(i % 2 ? inside : outside, link + ".t"); fs.renameSync(link + ".t", link); } catch {}
         }
         try { fs.rmSync(link + ".t", { force: true }) } catch {}`,
        link,
        inside,
        outside
      ],
      { stdio: "ignore" }
    )
    let leaked = 0
    let served = 0
    const deadline = Date.now() + 3000
    const reads = async () => {
      while (Date.now() < deadline) {
        const read = await run(Effect.either(store.readFile("a", "docs/a.md")))
        if (read._tag === "Right") {
          served++
          if (read.right.content.includes("SECRET")) leaked++
        }
      }
    }
    const writes = async () => {
      for (let i = 0; Date.now() < deadline; i++)
        await run(Effect.either(store.writeFile("a", `docs/w${i % 5}.md`, "written\n")))
    }
    await Promise.all([reads(), reads(), writes()])
    swapper.kill()
    await new Promise((resolve) => swapper.once("exit", resolve))
    expect(leaked).toBe(0)
    expect(readdirSync(outside)).toEqual(["a.md"])
    expect(readFileSync(join(outside, "a.md"), "utf8")).toBe("SECRET\n")
    expect(served).toBeGreaterThan(0)
  }, 20_000)
})
