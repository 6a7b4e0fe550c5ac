/**
 * `ctxo memory` as a user runs it, on a copy of the example data: L1 and L2 of a session, a pin
 * that promotes a turn, refusals naming what is missing, and L4 written when a session ends.
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { ctxo } from "./ctxo.ts"

const example = fileURLToPath(new URL("../../../fixtures/data", import.meta.url))
const temps: Array<string> = []
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true })
})
const dataCopy = () => {
  const dir = mkdtempSync(join(tmpdir(), "ctxo-cli-memory-"))
  temps.push(dir)
  cpSync(example, join(dir, "data"), { recursive: true })
  return join(dir, "data")
}

describe("ctxo memory", () => {
  it("lists a session's levels, pins a turn into L2, and persists it to L4 when the session ends", async () => {
    const data = dataCopy()
    // The example turns are older than L1's 30 minutes: listed only with --expired.
    const fresh = await ctxo([
      "memory",
      "list",
      "--data",
      data,
      "--session",
      "code-agent-auth",
      "--level",
      "L1"
    ])
    expect([fresh.code, fresh.stdout.trim()]).toEqual([0, "no L1 memory"])
    const l1 = await ctxo([
      "memory",
      "list",
      "--data",
      data,
      "--session",
      "code-agent-auth",
      "--level",
      "L1",
      "--expired",
      "--json"
    ])
    expect(l1.code).toBe(0)
    const entries = JSON.parse(l1.stdout).entries as Array<{ id: string }>
    expect(entries.length).toBeGreaterThan(0)
    const first = entries[0]!.id
    expect(first).toMatch(/^L1:code-agent-auth:t\d+$/)

    const pinned = await ctxo(["memory", "pin", "--data", data, "--session", "code-agent-auth", first])
    expect([pinned.code, pinned.stdout.trim()]).toEqual([0, `${first} pinned`])
    const l2 = await ctxo([
      "memory",
      "list",
      "--data",
      data,
      "--session",
      "code-agent-auth",
      "--level",
      "L2",
      "--json"
    ])
    const promoted = `L2:${first.slice(3)}`
    expect((JSON.parse(l2.stdout).entries as Array<{ id: string }>).map((e) => e.id)).toContain(promoted)

    expect(existsSync(join(data, "memory.json"))).toBe(false)
    const ended = await ctxo(["sessions", "end", "--data", data, "code-agent-auth"])
    expect(ended.code).toBe(0)
    const l4 = await ctxo(["memory", "list", "--data", data, "--level", "L4", "--json"])
    const global = JSON.parse(l4.stdout).entries as Array<{ sources: Array<{ session: string }> }>
    expect(global.some((e) => e.sources.some((s) => s.session === "code-agent-auth"))).toBe(true)
    // On disk, in the root's memory.json (L3 and L4).
    const onDisk = JSON.parse(readFileSync(join(data, "memory.json"), "utf8")) as Array<{ level: string }>
    expect(new Set(onDisk.map((e) => e.level))).toEqual(new Set(["L3", "L4"]))
  })

  it("refuses a session level without --session and an id that is no entry, in one line", async () => {
    const data = dataCopy()
    const noSession = await ctxo(["memory", "list", "--data", data, "--level", "L2"])
    expect([noSession.code, noSession.stderr.trim()]).toEqual([
      1,
      "ctxo: ctxo memory list: --level L2 is a session's level: name it with --session"
    ])
    const missing = await ctxo(["memory", "delete", "--data", data, "L3:0000000000000000"])
    expect([missing.code, missing.stderr.trim()]).toEqual([
      1,
      "ctxo: the data root has no L3 memory entry L3:0000000000000000"
    ])
  })
})
