/**
 * `ctxo store migrate` as a user runs it, on a copy of the example data with a second tenant,
 * tasks, a tool result, the root's memory and a task distribution: into a PostgreSQL database of
 * the run's own (`TestDatabase`) and back out into a new folder, which holds what the first one
 * held and compiles every session to the same request; a target that is not empty and two folders
 * are refused with one sentence, writing nothing.
 */
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import * as TestDatabase from "@ctxo/store-pg/TestDatabase"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ctxo } from "./ctxo.ts"

const example = fileURLToPath(new URL("../../../fixtures/data", import.meta.url))
const temps: Array<string> = []
let database: TestDatabase.TestDatabase
beforeAll(async () => {
  database = await TestDatabase.create()
})
afterAll(async () => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true })
  await database?.drop()
})

const at = "2026-11-20T10:00:00.000Z"
/** The example data, a tenant `acme` with one session, and the files the stores keep as data. */
const dataRoot = () => {
  const dir = mkdtempSync(join(tmpdir(), "ctxo-cli-store-"))
  temps.push(dir)
  const data = join(dir, "data")
  cpSync(example, data, { recursive: true })
  writeFileSync(
    join(data, "code-agent-auth", "tasks.json"),
    JSON.stringify([
      { id: "t-1", title: "Fix the cookie", status: "in_progress", createdAt: at, updatedAt: at }
    ])
  )
  mkdirSync(join(data, "code-agent-auth", "tool-results"))
  writeFileSync(join(data, "code-agent-auth", "tool-results", "call_9.json"), '{"lines": ["a", "b"]}\n')
  writeFileSync(
    join(data, "memory.json"),
    JSON.stringify([
      {
        id: "L4:x",
        level: "L4",
        text: "Cookies expire.",
        importance: 0.8,
        reasons: [],
        sources: [],
        createdAt: at,
        updatedAt: at
      }
    ])
  )
  writeFileSync(
    join(data, "distributions.json"),
    JSON.stringify([
      {
        id: "d-1",
        createdAt: at,
        idempotencyKey: "once",
        request: { task: { title: "Review" }, mode: "broadcast" },
        results: [{ session: "code-agent-auth", taskId: "t-2" }],
        complete: true
      }
    ])
  )
  const acme = join(data, "tenants", "acme")
  mkdirSync(join(acme, "notes"), { recursive: true })
  writeFileSync(
    join(acme, "sessions.json"),
    JSON.stringify([
      {
        id: "notes",
        concept: "Acme's notes",
        createdAt: at,
        state: "paused",
        stateChangedAt: at,
        metadata: { team: "a" }
      }
    ])
  )
  writeFileSync(join(acme, "notes", "todo.md"), "# Todo\n\n- ship\n")
  writeFileSync(join(acme, "system-prompt.md"), "You help Acme.\n")
  return data
}

/** Every file under `dir` by its relative path, JSON files parsed (their layout is the writer's). */
const contents = (dir: string) => {
  const out: Record<string, unknown> = {}
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const full = join(d, e.name)
      if (e.isDirectory()) walk(full)
      else {
        const text = readFileSync(full, "utf8")
        out[relative(dir, full)] = e.name.endsWith(".json") ? JSON.parse(text) : text
      }
    }
  }
  walk(dir)
  return out
}

describe("ctxo store migrate", () => {
  it("moves a data root into PostgreSQL and back out, every tenant, each session compiling the same", async () => {
    const data = dataRoot()
    const into = await ctxo(["store", "migrate", "--from", data, "--to", database.url])
    expect(into.stderr).toBe("")
    expect(into.code).toBe(0)
    expect(into.stdout).toMatch(
      /^tenant default: 2 sessions \(\d+ files, 2 histories\), 2 global files moved to /m
    )
    expect(into.stdout).toMatch(/^tenant acme: 1 session \(1 files, 0 histories\), 1 global file moved to /m)
    expect(into.stdout).toMatch(
      /^3 sessions moved from .* to 127\.0\.0\.1:\d+\/ctxo_test_\w+; each compiles the same request as before the move$/m
    )
    // The password of the URL is never printed.
    expect(into.stdout).not.toContain("postgres@")

    // Into a database that holds data already: refused, nothing written.
    const again = await ctxo(["store", "migrate", "--from", data, "--to", database.url])
    expect(again.code).toBe(1)
    expect(again.stderr.trim()).toMatch(
      /^ctxo: 127\.0\.0\.1:\d+\/ctxo_test_\w+ \(tenant default\) is not empty \(2 sessions, 2 global files\): move into an empty data root or database$/
    )

    const out = join(data, "..", "back")
    const back = await ctxo(["store", "migrate", "--from", database.url, "--to", out])
    expect(back.code).toBe(0)
    expect(back.stdout).toMatch(
      /^3 sessions moved from .* to .*back; each compiles the same request as before the move$/m
    )
    const before = contents(data)
    const after = contents(out)
    // The records gain their default fields when written by the store; the rest is as it was.
    const withDefaults = (records: unknown) =>
      (records as Array<Record<string, unknown>>).map((r) => ({
        state: "active",
        stateChangedAt: r.createdAt,
        metadata: {},
        ...r
      }))
    expect(after["sessions.json"]).toEqual(withDefaults(before["sessions.json"]))
    expect(Object.keys(after).sort()).toEqual(Object.keys(before).sort())
    for (const path of Object.keys(before))
      if (path !== "sessions.json") expect([path, after[path]]).toEqual([path, before[path]])

    // What a user checks: the same request compiled from either folder.
    for (const session of ["code-agent-auth", "notebook-physics"]) {
      const from = await ctxo(["compile", "--data", data, "--session", session])
      const to = await ctxo(["compile", "--data", out, "--session", session])
      expect(from.code).toBe(0)
      expect(to.stdout).toBe(from.stdout)
    }
  })

  it("refuses two folders or two databases, and a source folder that does not exist", async () => {
    const data = dataRoot()
    const folders = await ctxo(["store", "migrate", "--from", data, "--to", join(data, "..", "copy")])
    expect([folders.code, folders.stderr.trim()]).toEqual([
      1,
      "ctxo: One of --from and --to must be a data root folder and the other a postgres:// URL (to move between two folders, copy the folder; between two databases, use pg_dump)."
    ])
    const missing = await ctxo(["store", "migrate", "--from", join(data, "nope"), "--to", database.url])
    expect(missing.code).toBe(1)
    expect(missing.stderr.trim()).toBe(`ctxo: --from ${join(data, "nope")} is not a data root folder.`)
  })
})
