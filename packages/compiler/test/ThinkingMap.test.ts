import { readFileSync } from "node:fs"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import type { HistoryDocument, Message } from "@ctxo/history/Message"
import { emptyHistory } from "@ctxo/history/Message"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import * as fc from "fast-check"
import { compile } from "../src/Compile.ts"
import type { ContextInfo } from "../src/ThinkingMap.ts"
import {
  contextInfo,
  formatContext,
  mapJsonSchema,
  parseMap,
  SECTION_IDS,
  SECTION_TITLES
} from "../src/ThinkingMap.ts"
import * as Workspace from "../src/Workspace.ts"

/** A release plan: `notes` depends on `freeze` (done, with a conclusion) and `changelog` (open). */
const release = {
  title: "Release 2.4",
  coreQuestion: "What must happen before 2.4 ships?",
  finalGoal: "2.4 tagged and announced by Friday",
  userContext: { audience: "self-hosting admins", tone: "plain" },
  nodes: [
    { id: "release", title: "Ship 2.4", question: "What is left before the tag?" },
    {
      id: "freeze",
      title: "Feature freeze",
      parent: "release",
      status: "done",
      conclusion: "Frozen on Monday: only the auth fix and the exporter made it in."
    },
    { id: "changelog", title: "Changelog", parent: "release", status: "open", question: "What changed?" },
    {
      id: "notes",
      title: "Release notes",
      parent: "release",
      question: "What do admins need to know to upgrade?",
      goal: "One page an admin can act on",
      status: "in-progress",
      dependencies: ["freeze", "changelog"],
      userContext: { tone: "friendly" }
    },
    { id: "upgrade", title: "Upgrade steps", parent: "notes", status: "open" },
    { id: "announce", title: "Announcement", parent: "release", dependencies: ["notes"] }
  ]
}
const map = Either.getOrThrow(parseMap(JSON.stringify(release), "s1/map.json"))

const message = (
  id: string,
  turn: number,
  role: "user" | "assistant",
  text: string,
  node?: string
): Message => ({
  id,
  role,
  parts: [{ _tag: "text", text }],
  meta: {
    turn,
    kind: role === "user" ? "input" : "final",
    ...(node === undefined ? {} : { node }),
    ...(role === "assistant" ? { finished: true } : {})
  }
})

const history: HistoryDocument = {
  ...emptyHistory,
  messages: [
    message("t1-0", 1, "user", "Draft the upgrade section.", "notes"),
    message("t1-1", 1, "assistant", "Drafted: back up, run migrations, restart."),
    message("t2-0", 2, "user", "Unrelated: what time is it?"),
    message("t2-1", 2, "assistant", "Noon."),
    message("t3-0", 3, "user", "What went into the changelog?", "changelog"),
    message("t3-1", 3, "assistant", "The auth fix and the exporter."),
    message("t4-0", 4, "user", "Mention the config rename too.", "notes"),
    message("t4-1", 4, "assistant", "Added: `auth.ttl` is now `auth.expiry`.")
  ]
}

const infoOf = (nodeId: string): ContextInfo => Either.getOrThrow(contextInfo({ map, nodeId, history }))
/** A word counter: enough to test budgets without a tokenizer. */
const words = (text: string) => text.split(/\s+/).filter((w) => w !== "").length

const invalid = (doc: unknown) =>
  Either.flip(parseMap(JSON.stringify(doc), "s1/map.json")).pipe(Either.getOrThrow)

describe("the map file", () => {
  it("names the node and the field of what is wrong with it", () => {
    const base = release.nodes
    const duplicate = invalid({ ...release, nodes: [...base, { id: "notes", title: "Again" }] })
    expect(duplicate.message).toBe(
      'Invalid thinking map s1/map.json: node "notes": nodes[6].id: the id "notes" is used by an earlier node'
    )
    expect(invalid({ title: "m", nodes: [{ id: "a", title: "A", parent: "zz" }] }).message).toBe(
      'Invalid thinking map s1/map.json: node "a": parent: no node "zz" in the map'
    )
    expect(invalid({ title: "m", nodes: [{ id: "a", title: "A", dependencies: ["b"] }] }).message).toBe(
      'Invalid thinking map s1/map.json: node "a": dependencies: no node "b" in the map'
    )
    const parents = invalid({
      title: "m",
      nodes: [
        { id: "a", title: "A", parent: "b" },
        { id: "b", title: "B", parent: "a" }
      ]
    })
    expect([parents.node, parents.field, parents.reason]).toEqual([
      "a",
      "parent",
      "the parents form a cycle: a -> b -> a"
    ])
    const deps = invalid({
      title: "m",
      nodes: [
        { id: "a", title: "A", dependencies: ["c"] },
        { id: "b", title: "B", dependencies: ["a"] },
        { id: "c", title: "C", dependencies: ["b"] }
      ]
    })
    expect(deps.message).toBe(
      'Invalid thinking map s1/map.json: node "a": dependencies: the dependencies form a cycle: a -> c -> b -> a'
    )
    const missingTitle = invalid({ title: "m", nodes: [{ id: "a", title: "A" }, { id: "b" }] })
    expect([missingTitle.node, missingTitle.field, missingTitle.reason]).toEqual([
      "b",
      "nodes[1].title",
      "a required field is missing"
    ])
    const typo = invalid({ title: "m", nodes: [{ id: "a", title: "A", dependecies: ["b"] }] })
    expect(typo.message).toBe(
      'Invalid thinking map s1/map.json: node "a": nodes[0].dependecies: this field is not allowed here'
    )
    const notJson = Either.flip(parseMap("{", "s1/map.json")).pipe(Either.getOrThrow)
    expect(notJson.message).toMatch(/^Invalid thinking map s1\/map\.json: \(root\): not valid JSON/)
  })

  it("still reads the task tree (dependsOn, content, no map title)", () => {
    const fixture = JSON.parse(
      readFileSync(new URL("../../../fixtures/sessions/tree-context.json", import.meta.url), "utf8")
    ) as { files: Record<string, string> }
    const tree = Either.getOrThrow(parseMap(fixture.files["tree.json"]!, "tree.json"))
    expect(tree.info.title).toBe("Quantum mechanics")
    const node = tree.nodes.find((n) => n.id === "tunnel")!
    expect([node.dependencies, node.description]).toEqual([["well"], "Barrier penetration."])
  })

  it("publishes its JSON Schema (map.schema.json is up to date)", () => {
    const published = JSON.parse(readFileSync(new URL("../map.schema.json", import.meta.url), "utf8"))
    expect(published).toEqual(JSON.parse(JSON.stringify(mapJsonSchema())))
    expect(published.required).toEqual(["nodes"])
  })
})

describe("a node's context", () => {
  it("collects the map, the node, its ancestors, dependencies, children, conversation and user context", () => {
    const info = infoOf("notes")
    expect(info.map).toEqual({
      title: "Release 2.4",
      coreQuestion: "What must happen before 2.4 ships?",
      finalGoal: "2.4 tagged and announced by Friday"
    })
    expect(info.ancestors.map((a) => a.id)).toEqual(["release"])
    expect(info.dependencies.map((d) => [d.id, d.conclusion])).toEqual([
      ["freeze", "Frozen on Monday: only the auth fix and the exporter made it in."],
      ["changelog", undefined]
    ])
    expect(info.children.map((c) => c.id)).toEqual(["upgrade"])
    expect(info.conversation.map((m) => `${m.turn} ${m.role}`)).toEqual([
      "1 user",
      "1 assistant",
      "4 user",
      "4 assistant"
    ])
    // The node's own context over the map's.
    expect(info.userContext).toEqual({ audience: "self-hosting admins", tone: "friendly" })
    expect(Either.flip(contextInfo({ map, nodeId: "nope", history })).pipe(Either.getOrThrow).message).toBe(
      'The thinking map map.json has no node "nope"'
    )
  })

  it("formats seven sections in order: the dependency's conclusion shown, only this node's conversation", () => {
    const formatted = formatContext(infoOf("notes"), { budget: 10_000, count: words })
    expect(formatted.sections.map((s) => s.id)).toEqual([...SECTION_IDS])
    expect(formatted.sections.map((s) => s.text.split("\n")[0])).toEqual(
      SECTION_IDS.map((id, i) => `## ${i + 1}. ${SECTION_TITLES[id]}`)
    )
    const text = (id: string) => formatted.sections.find((s) => s.id === id)!.text
    expect(text("map")).toContain("Core question: What must happen before 2.4 ships?")
    expect(text("node")).toBe(
      [
        "## 3. Current node task",
        "Node: Release notes [notes]",
        "Question: What do admins need to know to upgrade?",
        "Goal: One page an admin can act on",
        "Status: in-progress",
        "User context, audience: self-hosting admins",
        "User context, tone: friendly"
      ].join("\n")
    )
    expect(text("ancestors")).toContain("- Ship 2.4 [release]\n  Question: What is left before the tag?")
    expect(text("dependencies")).toBe(
      [
        "## 5. Dependencies and their conclusions",
        "- Feature freeze [freeze] (done)",
        "  Conclusion: Frozen on Monday: only the auth fix and the exporter made it in.",
        "- Changelog [changelog] (open)",
        "  Question: What changed?",
        "  Conclusion: none yet"
      ].join("\n")
    )
    expect(text("children")).toBe("## 6. Existing sub-questions (children)\n- Upgrade steps [upgrade] (open)")
    expect(text("conversation")).toBe(
      [
        "## 7. Conversation about this node",
        "Turn 1, user: Draft the upgrade section.",
        "Turn 1, assistant: Drafted: back up, run migrations, restart.",
        "Turn 4, user: Mention the config rename too.",
        "Turn 4, assistant: Added: `auth.ttl` is now `auth.expiry`."
      ].join("\n")
    )
    expect(formatted.text).not.toContain("what time is it")
    expect(formatted.text).not.toContain("auth fix and the exporter.\n")
    expect(formatted.sections.every((s) => s.dropped === 0 && !s.text.includes("left out"))).toBe(true)
    expect(formatted.text).toBe(formatted.sections.map((s) => s.text).join("\n\n"))
    expect(formatted.tokens).toBe(words(formatted.text))
  })

  it("says so when a section is empty (a root has no ancestors, nothing was said about it)", () => {
    const formatted = formatContext(infoOf("release"), { budget: 10_000, count: words })
    const text = (id: string) => formatted.sections.find((s) => s.id === id)!.text
    expect(text("ancestors")).toBe(
      "## 4. Decomposition path (ancestors, root first)\nNone: this node is a root of the map."
    )
    expect(text("dependencies")).toContain("None: this node depends on no other node.")
    expect(text("conversation")).toContain("No conversation about this node yet.")
    expect(formatted.sections.find((s) => s.id === "children")!.kept).toBe(4)
  })

  it("cuts whole messages under a tiny budget, the newest kept, with a marker saying how many were left out", () => {
    const said = Array.from({ length: 3 }, (_, t) => [
      message(`u${t}`, t + 1, "user", `message ${2 * t} ${"word ".repeat(20)}`.trim(), "upgrade"),
      message(`a${t}`, t + 1, "assistant", `message ${2 * t + 1} ${"word ".repeat(20)}`.trim())
    ]).flat()
    const info = Either.getOrThrow(
      contextInfo({ map, nodeId: "upgrade", history: { ...emptyHistory, messages: said } })
    )
    expect(info.conversation).toHaveLength(6)
    const formatted = formatContext(info, { budget: 200, count: words })
    const conversation = formatted.sections.find((s) => s.id === "conversation")!
    expect(conversation.dropped).toBeGreaterThan(0)
    expect(conversation.text).toContain(
      `[${conversation.dropped} earlier messages left out: over this section's ${conversation.budget} tokens]`
    )
    // The newest message is kept; the oldest left out; no message is cut in the middle.
    expect(conversation.text).toContain("message 5 ")
    expect(conversation.text).not.toContain("message 0 ")
    for (const line of conversation.text.split("\n").filter((l) => l.startsWith("Turn ")))
      expect(line.endsWith("word")).toBe(true)
    expect(conversation.tokens).toBeLessThanOrEqual(conversation.budget)
  })

  it("any budget: seven sections, kept items whole, a section over its grant only with nothing optional kept", () => {
    const all = formatContext(infoOf("notes"), { budget: 100_000, count: words })
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 400 }), (budget) => {
        const formatted = formatContext(infoOf("notes"), { budget, count: words })
        expect(formatted.sections).toHaveLength(7)
        for (const [i, section] of formatted.sections.entries()) {
          const full = all.sections[i]!
          const lines = section.text.split("\n").slice(1)
          // Every kept line is a line of the uncut section (or the marker).
          for (const line of lines) if (!line.startsWith("[")) expect(full.text.split("\n")).toContain(line)
          expect(section.kept + section.dropped).toBe(section.items)
          if (section.dropped > 0)
            expect(lines.at(-1)).toMatch(/ left out: over this section's \d+ tokens\]$/)
          // Over its grant only when nothing but its heading, its required title and the marker is left.
          const required = section.id === "map" || section.id === "node" ? 1 : 0
          if (section.tokens > section.budget) expect(section.kept).toBeLessThanOrEqual(required)
        }
      })
    )
  })
})

describe("tree__context in a compile", () => {
  const layer = (files: Workspace.MemoryFiles) =>
    Layer.mergeAll(Workspace.layerMemory(files), ModelRegistry.layer(), Tokenizer.layer())
  const files: Workspace.MemoryFiles = {
    global: {},
    sessions: {
      s1: {
        "map.json": JSON.stringify(release),
        "context-config.json": JSON.stringify({ tree: { node: "notes" }, query: "Write the notes." })
      }
    }
  }

  it.effect(
    "shows the manifest's node (map.json by default) in seven sections, counted in the knowledge share",
    () =>
      Effect.gen(function* () {
        const result = yield* compile({ sessionId: "s1", format: "openai", history })
        const unit = result.report.units.find((u) => u.id === "map.json#notes")!
        expect(unit).toMatchObject({ source: "knowledge", status: "included" })
        expect(unit.tokens).toBeGreaterThan(50)
        const knowledge = result.report.sources.find((s) => s.id === "knowledge")!
        expect(knowledge.used).toBeGreaterThanOrEqual(unit.tokens)
        if (result.format !== "openai") throw new Error("openai expected")
        const system = result.request.messages.map((m) => m.content ?? "").join("\n")
        expect(system).toContain("## 5. Dependencies and their conclusions")
        expect(system).toContain("Frozen on Monday")
        expect(system).toContain("Turn 4, user: Mention the config rename too.")
      }).pipe(Effect.provide(layer(files)))
  )

  it.effect("shows a handed node context instead of the manifest's", () =>
    Effect.gen(function* () {
      const result = yield* compile({
        sessionId: "s1",
        format: "openai",
        history,
        nodeContext: infoOf("upgrade")
      })
      expect(result.report.units.map((u) => u.id)).toContain("node:upgrade")
      expect(result.report.units.map((u) => u.id)).not.toContain("map.json#notes")
    }).pipe(Effect.provide(layer(files)))
  )

  it.effect(
    "shows the node a running turn's input names when the manifest names none; an unknown node only warns",
    () =>
      Effect.gen(function* () {
        const running = (node: string): HistoryDocument => ({
          ...history,
          messages: [...history.messages, message("t5-0", 5, "user", "Which backups first?", node)]
        })
        const noTree: Workspace.MemoryFiles = {
          global: {},
          sessions: { s1: { "map.json": JSON.stringify(release), "context-config.json": "{}" } }
        }
        const result = yield* compile({
          sessionId: "s1",
          format: "openai",
          history: running("upgrade")
        }).pipe(Effect.provide(layer(noTree)))
        expect(result.report.units.map((u) => u.id)).toContain("map.json#upgrade")
        const unknown = yield* compile({ sessionId: "s1", format: "openai", history: running("nope") }).pipe(
          Effect.provide(layer(noTree))
        )
        expect(unknown.report.units.some((u) => u.id.startsWith("map.json#"))).toBe(false)
        expect(unknown.warnings.join("\n")).toContain("node nope of the turn's input")
        // A finished turn about a node: the next input is not about it.
        const finished = yield* compile({ sessionId: "s1", format: "openai", history, query: "Next?" }).pipe(
          Effect.provide(layer(noTree))
        )
        expect(finished.report.units.some((u) => u.id.startsWith("map.json#"))).toBe(false)
      })
  )

  it.effect("names the map, the node and the field when the manifest's map is invalid", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(compile({ sessionId: "s1", format: "openai" }))
      expect(error.message).toBe(
        'Reference map.json#notes: Invalid thinking map map.json: node "b": parent: no node "x" in the map'
      )
    }).pipe(
      Effect.provide(
        layer({
          global: {},
          sessions: {
            s1: {
              "map.json": JSON.stringify({
                title: "m",
                nodes: [
                  { id: "notes", title: "N" },
                  { id: "b", title: "B", parent: "x" }
                ]
              }),
              "context-config.json": JSON.stringify({ tree: { node: "notes" }, query: "go" })
            }
          }
        })
      )
    )
  )
})
