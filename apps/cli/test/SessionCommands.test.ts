/**
 * `ctxo sessions` and `ctxo tasks` as a user runs them, on a copy of the example data: lifecycle
 * states written to sessions.json, refusals with exit code 1 and one line, tasks, and distribution
 * (broadcast, filtered, skipped, the same idempotency key run twice).
 */
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
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
/** A copy of the example data the commands may change. */
const dataCopy = () => {
  const dir = mkdtempSync(join(tmpdir(), "ctxo-cli-sessions-"))
  temps.push(dir)
  cpSync(example, join(dir, "data"), { recursive: true })
  return join(dir, "data")
}
const index = (data: string) =>
  JSON.parse(readFileSync(join(data, "sessions.json"), "utf8")) as Array<{
    id: string
    state: string
    metadata: Record<string, string>
  }>

describe("ctxo sessions", () => {
  it("lists states, pauses, resumes and ends; an ended session refuses to come back", async () => {
    const data = dataCopy()
    const listed = await ctxo(["sessions", "list", "--data", data])
    expect(listed.code).toBe(0)
    expect(listed.stdout).toMatch(
      /^notebook-physics +active +since 2026-11-01T09:00:00\.000Z +Quantum mechanics notes$/m
    )
    const paused = await ctxo(["sessions", "pause", "--data", data, "code-agent-auth"])
    expect(paused.stdout).toMatch(/^code-agent-auth: paused since \d{4}-/)
    expect(index(data).find((s) => s.id === "code-agent-auth")?.state).toBe("paused")
    const again = await ctxo(["sessions", "pause", "--data", data, "code-agent-auth"])
    expect([again.code, again.stdout.trim()]).toEqual([0, "code-agent-auth is already paused"])
    const ended = await ctxo(["sessions", "end", "--data", data, "--json", "code-agent-auth"])
    expect(JSON.parse(ended.stdout)).toMatchObject({ id: "code-agent-auth", state: "ended" })
    const back = await ctxo(["sessions", "resume", "--data", data, "code-agent-auth"])
    expect(back.code).toBe(1)
    expect(back.stderr.trim()).toBe(
      "ctxo: Session code-agent-auth is ended, so it cannot resume (ended -> active): an ended session is final"
    )
    const unknown = await ctxo(["sessions", "pause", "--data", data, "nope"])
    expect([unknown.code, unknown.stderr.trim()]).toEqual([1, "ctxo: No session nope"])
    const json = JSON.parse((await ctxo(["sessions", "list", "--data", data, "--json"])).stdout)
    expect(json.map((s: { state: string }) => s.state)).toEqual(["active", "ended"])
  })

  it("sets and removes metadata", async () => {
    const data = dataCopy()
    const set = await ctxo([
      "sessions",
      "update",
      "--data",
      data,
      "notebook-physics",
      "--meta",
      "team=physics",
      "--meta",
      "draft=yes"
    ])
    expect(set.code, set.stderr).toBe(0)
    expect(set.stdout).toContain("[draft=yes team=physics]")
    await ctxo(["sessions", "update", "--data", data, "notebook-physics", "--unset", "draft"])
    expect(index(data).find((s) => s.id === "notebook-physics")?.metadata).toEqual({ team: "physics" })
  })
})

describe("ctxo tasks", () => {
  it("adds, lists and updates a session's tasks; an unknown task and an ended session are errors", async () => {
    const data = dataCopy()
    const added = await ctxo([
      "tasks",
      "add",
      "--data",
      data,
      "-s",
      "notebook-physics",
      "-d",
      "Section 2",
      "Read"
    ])
    expect(added.code, added.stderr).toBe(0)
    const id = /^added (t-\S+) to notebook-physics: Read$/.exec(added.stdout.trim())?.[1]
    expect(id).toBeDefined()
    const done = await ctxo([
      "tasks",
      "update",
      "--data",
      data,
      "-s",
      "notebook-physics",
      id!,
      "--status",
      "done"
    ])
    expect(done.stdout).toMatch(new RegExp(`^${id} +done +Read$`, "m"))
    const listed = JSON.parse(
      (await ctxo(["tasks", "list", "--data", data, "-s", "notebook-physics", "--json"])).stdout
    )
    expect(listed).toEqual([
      expect.objectContaining({ id, title: "Read", description: "Section 2", status: "done" })
    ])
    const unknown = await ctxo([
      "tasks",
      "update",
      "--data",
      data,
      "-s",
      "notebook-physics",
      "t-nope",
      "--status",
      "done"
    ])
    expect([unknown.code, unknown.stderr.trim()]).toEqual([
      1,
      "ctxo: Session notebook-physics has no task t-nope"
    ])
    const badStatus = await ctxo([
      "tasks",
      "update",
      "--data",
      data,
      "-s",
      "notebook-physics",
      id!,
      "--status",
      "finished"
    ])
    expect(badStatus.code).toBe(1)
    await ctxo(["sessions", "end", "--data", data, "notebook-physics"])
    const late = await ctxo(["tasks", "add", "--data", data, "-s", "notebook-physics", "Late"])
    expect([late.code, late.stderr.trim()]).toEqual([
      1,
      "ctxo: Session notebook-physics is ended, so it cannot take a new task: an ended session is final"
    ])
  })

  it("distributes a task: broadcast, filtered by metadata, ended sessions skipped, a key run twice adds once", async () => {
    const data = dataCopy()
    await ctxo(["sessions", "update", "--data", data, "notebook-physics", "--meta", "team=physics"])
    const all = await ctxo(["tasks", "distribute", "--data", data, "--mode", "broadcast", "Status note"])
    expect(all.code, all.stderr).toBe(0)
    expect(all.stdout).toMatch(/^d-\S+: 2 of 2 sessions got the task$/m)
    const filtered = await ctxo([
      "tasks",
      "distribute",
      "--data",
      data,
      "--mode",
      "filtered",
      "--filter",
      "team=physics",
      "Check the units"
    ])
    expect(filtered.stdout.trim()).toMatch(/: 1 of 1 sessions got the task\nnotebook-physics +t-\S+$/)
    await ctxo(["sessions", "end", "--data", data, "code-agent-auth"])
    const args = [
      "tasks",
      "distribute",
      "--data",
      data,
      "--mode",
      "broadcast",
      "--sessions",
      "notebook-physics,code-agent-auth"
    ]
    const keyed = await ctxo([...args, "--idempotency-key", "k-1", "--json", "Once"])
    const first = JSON.parse(keyed.stdout)
    expect(first.results).toEqual([
      { session: "notebook-physics", taskId: expect.stringMatching(/^t-/) },
      { session: "code-agent-auth", skipped: "ended", message: "Session code-agent-auth is ended" }
    ])
    const rerun = await ctxo([...args, "--idempotency-key", "k-1", "Once"])
    expect(rerun.stdout).toMatch(
      new RegExp(`^${first.distributionId} \\(answered before, nothing added now\\)`)
    )
    const tasks = JSON.parse(
      (await ctxo(["tasks", "list", "--data", data, "-s", "notebook-physics", "--json"])).stdout
    )
    expect(tasks.map((t: { title: string }) => t.title)).toEqual(["Status note", "Check the units", "Once"])
    const noFilter = await ctxo(["tasks", "distribute", "--data", data, "--mode", "filtered", "x"])
    expect(noFilter.code).toBe(1)
    expect(noFilter.stderr).toMatch(/^ctxo: filter: mode filtered needs a filter/)
  })
})
