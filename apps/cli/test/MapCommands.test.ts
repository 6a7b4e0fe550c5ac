/**
 * `ctxo map` as a user runs it, on a copy of the example data: the example session's release map
 * shown as an outline, a node's context in seven sections with tokens (text and JSON), cut with
 * markers under a small budget, a map set from a file and an invalid one refused in one line naming
 * the node and the field.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
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
  const dir = mkdtempSync(join(tmpdir(), "ctxo-cli-map-"))
  temps.push(dir)
  cpSync(example, join(dir, "data"), { recursive: true })
  return { dir, data: join(dir, "data") }
}

describe("ctxo map", () => {
  it("shows the example release map as an outline", async () => {
    const { data } = dataCopy()
    const run = await ctxo(["map", "show", "--data", data, "-s", "code-agent-auth"])
    expect(run.code, run.stderr).toBe(0)
    const lines = run.stdout.trim().split("\n")
    expect(lines[0]).toMatch(/^Release 1\.4\.1: the login fix {2}\(map\.json, version [0-9a-f]{16}\)$/)
    expect(lines).toContain("- Ship 1.4.1 [release] (in-progress)")
    expect(lines).toContain("  - Fix the expiry comparison [fix] (open)  needs cause")
  })

  it("prints a node's context in seven sections with tokens, and cuts them under a small budget", async () => {
    const { data } = dataCopy()
    const run = await ctxo(["map", "context", "--data", data, "-s", "code-agent-auth", "--node", "fix"])
    expect(run.code, run.stderr).toBe(0)
    const headings = run.stdout.split("\n").filter((l) => /^## \d\. /.test(l))
    expect(headings).toEqual([
      "## 1. Task background",
      "## 2. Map overview",
      "## 3. Current node task",
      "## 4. Decomposition path (ancestors, root first)",
      "## 5. Dependencies and their conclusions",
      "## 6. Existing sub-questions (children)",
      "## 7. Conversation about this node"
    ])
    expect(run.stdout).toContain(
      "- Find why users are logged out [cause] (done)\n  Question: Why does a fresh session count as expired?\n  Conclusion: isExpired in src/auth.ts compares the wrong way round"
    )
    expect(run.stdout).toContain("User context, release date: 2026-11-06")
    // Counted for the session manifest's model, under its knowledge share.
    expect(run.stdout).toMatch(/\n# \d+ of \d+ tokens \(claude-sonnet-4-5, estimate\)\n/)
    expect(run.stdout).toMatch(/# {3}5\. Dependencies and their conclusions +\d+ of +\d+ {2}1 of 1 items\n/)

    const small = await ctxo([
      "map",
      "context",
      "--data",
      data,
      "-s",
      "code-agent-auth",
      "-n",
      "rollout",
      "--budget",
      "150",
      "--json"
    ])
    expect(small.code, small.stderr).toBe(0)
    const json = JSON.parse(small.stdout) as {
      budget: number
      tokens: number
      sections: ReadonlyArray<{ id: string; text: string; tokens: number; dropped: number }>
    }
    expect(json.budget).toBe(150)
    expect(json.sections).toHaveLength(7)
    const cut = json.sections.filter((s) => s.dropped > 0)
    expect(cut.length).toBeGreaterThan(0)
    for (const s of cut) expect(s.text).toMatch(/\[\d+ .+ left out: over this section's \d+ tokens\]$/)
  })

  it("sets a map from a file, and refuses an invalid one naming the node and the field", async () => {
    const { dir, data } = dataCopy()
    const good = join(dir, "plan.json")
    writeFileSync(
      good,
      JSON.stringify({
        title: "Physics exam",
        nodes: [
          { id: "exam", title: "Pass the exam" },
          { id: "waves", title: "Wave functions", parent: "exam", conclusion: "Normalise first." },
          { id: "wells", title: "Infinite well", parent: "exam", dependencies: ["waves"] }
        ]
      })
    )
    const set = await ctxo(["map", "set", "--data", data, "-s", "notebook-physics", good])
    expect(set.code, set.stderr).toBe(0)
    expect(set.stdout.trim()).toMatch(/^notebook-physics\/map\.json written \(version [0-9a-f]{16}\)$/)
    expect(JSON.parse(readFileSync(join(data, "notebook-physics", "map.json"), "utf8")).title).toBe(
      "Physics exam"
    )

    const bad = join(dir, "bad.json")
    writeFileSync(
      bad,
      JSON.stringify({
        title: "Physics exam",
        nodes: [
          { id: "exam", title: "Pass the exam", dependencies: ["wells"] },
          { id: "wells", title: "Infinite well", dependencies: ["exam"] }
        ]
      })
    )
    const refused = await ctxo(["map", "set", "--data", data, "-s", "notebook-physics", bad])
    expect([refused.code, refused.stderr.trim()]).toEqual([
      1,
      'ctxo: Invalid thinking map notebook-physics/map.json: node "exam": dependencies: the dependencies form a cycle: exam -> wells -> exam'
    ])
    expect(JSON.parse(readFileSync(join(data, "notebook-physics", "map.json"), "utf8")).nodes).toHaveLength(3)

    const unknown = await ctxo(["map", "context", "--data", data, "-s", "notebook-physics", "-n", "nope"])
    expect([unknown.code, unknown.stderr.trim()]).toEqual([
      1,
      'ctxo: The thinking map notebook-physics/map.json has no node "nope"'
    ])
  })
})
