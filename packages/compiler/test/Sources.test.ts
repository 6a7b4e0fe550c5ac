import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { compile } from "../src/Compile.ts"
import type { ContextSource } from "../src/ContextSource.ts"
import { defaultSources } from "../src/ContextSource.ts"
import { findRulesFile, globMatcher, todoRecap } from "../src/Sources.ts"
import * as Workspace from "../src/Workspace.ts"

const tree = JSON.stringify({
  nodes: [
    { id: "root", title: "Ship v1" },
    { id: "auth", title: "Authentication", parent: "root", status: "in progress" },
    { id: "db", title: "Database schema", parent: "root", status: "done" },
    {
      id: "login",
      title: "Fix login expiry",
      parent: "auth",
      dependsOn: ["db"],
      description: "Sessions expire too early.",
      status: "in progress"
    },
    { id: "test", title: "Regression test", parent: "login", status: "todo" }
  ]
})

describe("sources", () => {
  it("finds CODE_LAW.md in any case at the root only", () => {
    expect(findRulesFile(["src/CODE_LAW.md", "Code_Law.md", "a.ts"])).toBe("Code_Law.md")
    expect(findRulesFile(["src/code_law.md"])).toBeUndefined()
  })

  it("recaps task lists", () => {
    expect(todoRecap("# M\n- [x] one\n- [ ] two\n  * [X] three\n- [ ] four\n", "milestones.md")).toBe(
      "Todo (milestones.md): 2 of 4 done.\nOpen:\n- [ ] two\n- [ ] four"
    )
    expect(todoRecap("no tasks here", "t.md")).toBeUndefined()
  })

  it("matches globs", () => {
    const match = globMatcher("docs/**/*.md")
    expect(["docs/a.md", "docs/x/y/b.md", "docs/a.txt", "other/a.md"].filter(match)).toEqual([
      "docs/a.md",
      "docs/x/y/b.md"
    ])
  })
})

describe("collectors in a compile", () => {
  const root = mkdtempSync(join(tmpdir(), "ctxo-sources-"))
  afterAll(() => rmSync(root, { recursive: true, force: true }))
  mkdirSync(join(root, "s1", "docs"), { recursive: true })
  writeFileSync(join(root, "s1", "tasks.json"), tree)
  writeFileSync(
    join(root, "s1", "docs", "raft.md"),
    "# Raft\nLeader election.\n\n# Log replication\nAppendEntries.\n"
  )
  writeFileSync(join(root, "s1", "docs", "paxos.md"), "# Paxos\nPrepare, promise, accept.\n")
  writeFileSync(
    join(root, "s1", "context-config.json"),
    JSON.stringify({
      policy: "notebook",
      tree: { file: "tasks.json", node: "login" },
      knowledge: [{ path: "docs/*.md" }],
      query: "go"
    })
  )
  const layer = Layer.mergeAll(
    Workspace.layer(root).pipe(Layer.provide(NodeContext.layer)),
    ModelRegistry.layer(),
    Tokenizer.layer()
  )

  it("collects tree and knowledge (by block) into their contexts", async () => {
    const result = await Effect.runPromise(
      compile({ sessionId: "s1", format: "openai" }).pipe(Effect.provide(layer))
    )
    const ids = result.composition.layers.map((l) => l.id)
    expect(ids).toEqual(["knowledge__context", "tree__context", "query"])
    const knowledge = result.report.units.filter((u) => u.source === "knowledge").map((u) => u.id)
    expect(knowledge).toEqual([
      "tasks.json#login",
      "docs/paxos.md#Paxos",
      "docs/raft.md#Raft",
      "docs/raft.md#Log replication"
    ])
  })

  it("refuses a collector that returns a key not ending in __context", async () => {
    const rogue: ContextSource = {
      id: "rogue",
      collect: () => Effect.succeed([{ key: "notes", id: "n", text: "x" }])
    }
    const error = await Effect.runPromise(
      Effect.flip(compile({ sessionId: "s1", sources: [...defaultSources, rogue] })).pipe(
        Effect.provide(layer)
      )
    )
    expect(error.message).toBe(
      'Context "notes": collector "rogue" returned a key that does not end in "__context"'
    )
  })
})
