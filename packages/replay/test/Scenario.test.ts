/**
 * The scenario format `ctxo.scenario/v1`: every fixture decodes, the published JSON Schema is the
 * decoder's, and a malformed scenario is refused with one sentence naming the file and the field.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { parseScenario, SCENARIO_FORMAT, scenarioJsonSchema } from "../src/Scenario.ts"
import { existingSessions } from "../src/ScenarioRun.ts"

const repo = fileURLToPath(new URL("../../..", import.meta.url))
const dir = join(repo, "fixtures", "scenarios")

const minimal = {
  format: SCENARIO_FORMAT,
  id: "tiny",
  description: "two sessions, one turn",
  data: { files: { "system-prompt.md": "You help." } },
  sessions: [
    { id: "a", concept: "A" },
    { id: "b", concept: "B", tenant: "acme" }
  ],
  steps: [{ type: "chat", session: "a", input: "hi", replies: [{ type: "assistant", text: "hello" }] }]
}

/** The minimal scenario with some of it replaced; its decoding error's sentence (or "ok"). */
const problem = (
  edit: (s: Record<string, unknown>) => void,
  existing?: (tenant: string) => ReadonlyArray<string>
) => {
  const s = structuredClone(minimal) as Record<string, unknown>
  edit(s)
  return Either.match(parseScenario(JSON.stringify(s), "tiny.json", existing), {
    onLeft: (e) => e.message,
    onRight: () => "ok"
  })
}
const stepsOf = (s: Record<string, unknown>) => s.steps as Array<Record<string, unknown>>

describe("ctxo.scenario/v1", () => {
  it("decodes every fixture in fixtures/scenarios, at least the four the gate relies on", () => {
    const files = readdirSync(dir).filter((f) => f.endsWith(".json"))
    expect(files.length).toBeGreaterThanOrEqual(4)
    for (const f of files) {
      const text = readFileSync(join(dir, f), "utf8")
      const parsed = parseScenario(text, f, existingSessions(JSON.parse(text), repo))
      expect(Either.isRight(parsed) ? "ok" : parsed.left.message, f).toBe("ok")
      if (Either.isRight(parsed)) expect(`${parsed.right.id}.json`).toBe(f)
    }
  })

  it("the fixtures cover aggregate, distribute, lifecycle, tasks, memory steps, restart and two tenants", () => {
    const types = new Set<string>()
    const tenants = new Set<string>()
    for (const f of readdirSync(dir).filter((x) => x.endsWith(".json"))) {
      const s = JSON.parse(readFileSync(join(dir, f), "utf8")) as {
        sessions: Array<{ tenant?: string }>
        steps: Array<{ type: string }>
      }
      for (const step of s.steps) types.add(step.type)
      for (const session of s.sessions) tenants.add(session.tenant ?? "default")
    }
    for (const t of [
      "chat",
      "pause",
      "resume",
      "end",
      "addTask",
      "updateTask",
      "distribute",
      "aggregate",
      "pinMemory",
      "deleteMemory",
      "persist",
      "restart",
      "createSession"
    ])
      expect(types, t).toContain(t)
    expect(tenants.size).toBeGreaterThanOrEqual(2)
  })

  it("publishes the decoder's own JSON Schema (scenario.schema.json is regenerated, never edited)", () => {
    const published = JSON.parse(
      readFileSync(fileURLToPath(new URL("../scenario.schema.json", import.meta.url)), "utf8")
    )
    expect(published).toEqual(JSON.parse(JSON.stringify(scenarioJsonSchema())))
  })

  it("accepts the minimal scenario", () => {
    expect(problem(() => {})).toBe("ok")
  })

  it.each([
    [
      "a wrong format",
      (s: Record<string, unknown>) => {
        s.format = "ctxo.scenario/v2"
      },
      /^Invalid scenario tiny\.json: format: expected "ctxo\.scenario\/v1", got "ctxo\.scenario\/v2"$/
    ],
    [
      "a step of an unknown type",
      (s: Record<string, unknown>) => {
        stepsOf(s)[0] = { type: "dance", session: "a" }
      },
      /^Invalid scenario tiny\.json: steps\[0\]\.type: expected one of chat, pause, resume, end, addTask, updateTask, distribute, aggregate, pinMemory, deleteMemory, persist, restart, createSession, run, got "dance"$/
    ],
    [
      "a chat without its input",
      (s: Record<string, unknown>) => {
        delete stepsOf(s)[0]!.input
      },
      /^Invalid scenario tiny\.json: steps\[0\]\.input: a required field is missing$/
    ],
    [
      "a chat without replies",
      (s: Record<string, unknown>) => {
        stepsOf(s)[0]!.replies = []
      },
      /^Invalid scenario tiny\.json: steps\[0\]\.replies: /
    ],
    [
      "a field the format does not have",
      (s: Record<string, unknown>) => {
        stepsOf(s)[0]!.mood = "cheerful"
      },
      /^Invalid scenario tiny\.json: steps\[0\]\.mood: this field is not allowed here$/
    ],
    [
      "a session id with a slash",
      (s: Record<string, unknown>) => {
        ;(s.sessions as Array<Record<string, unknown>>)[0]!.id = "../etc"
      },
      /^Invalid scenario tiny\.json: sessions\[0\]\.id: a session id is 1-128 letters/
    ],
    [
      "a distribution mode that does not exist",
      (s: Record<string, unknown>) => {
        stepsOf(s).push({ type: "distribute", mode: "multicast", task: { title: "x" } })
      },
      /^Invalid scenario tiny\.json: steps\[1\]\.mode: expected "broadcast" or "filtered", got "multicast"$/
    ],
    [
      "a restart back in time",
      (s: Record<string, unknown>) => {
        stepsOf(s).push({ type: "restart", advanceMs: -5 })
      },
      /^Invalid scenario tiny\.json: steps\[1\]\.advanceMs: /
    ],
    [
      "a scenario without its id",
      (s: Record<string, unknown>) => {
        s.id = undefined
      },
      /^Invalid scenario tiny\.json: id: a required field is missing$/
    ]
  ])("refuses %s in one sentence naming the field", (_, edit, expected) => {
    const message = problem(edit)
    expect(message).toMatch(expected)
    expect(message).not.toContain("\n")
    expect(message.length).toBeLessThanOrEqual(340)
  })

  it("refuses text that is not JSON, naming the file", () => {
    const parsed = parseScenario("{ not json", "broken.json")
    expect(Either.isLeft(parsed) && parsed.left.message).toMatch(
      /^Invalid scenario broken\.json: .*not valid JSON/
    )
  })

  it.each([
    [
      "a turn in a session nobody created",
      (s: Record<string, unknown>) => {
        stepsOf(s)[0]!.session = "ghost"
      },
      "steps[0].session: no session ghost of tenant default is created before this step"
    ],
    [
      "a turn in another tenant's session, acting as the default tenant",
      (s: Record<string, unknown>) => {
        stepsOf(s)[0]!.session = "b"
      },
      "steps[0].session: no session b of tenant default is created before this step"
    ],
    [
      "a turn before the step that creates its session",
      (s: Record<string, unknown>) => {
        stepsOf(s).unshift({
          type: "chat",
          session: "c",
          input: "x",
          replies: [{ type: "assistant", text: "y" }]
        })
        stepsOf(s).push({ type: "createSession", id: "c", concept: "C" })
      },
      "steps[0].session: no session c of tenant default is created before this step"
    ],
    [
      "a session created twice",
      (s: Record<string, unknown>) => {
        stepsOf(s).push({ type: "createSession", id: "a", concept: "again" })
      },
      "steps[1].id: session a is created twice in tenant default"
    ],
    [
      "an update of a task no step named",
      (s: Record<string, unknown>) => {
        stepsOf(s).push({ type: "updateTask", session: "a", task: "review", status: "done" })
      },
      'steps[1].task: no addTask before this step names a task review (give it "as": "review")'
    ],
    [
      "an update that changes nothing",
      (s: Record<string, unknown>) => {
        stepsOf(s).push({ type: "addTask", session: "a", title: "Review", as: "review" })
        stepsOf(s).push({ type: "updateTask", session: "a", task: "review" })
      },
      "steps[2]: an updateTask changes the status or the title"
    ],
    [
      "an L2 pin without its turn",
      (s: Record<string, unknown>) => {
        stepsOf(s).push({ type: "pinMemory", level: "L2", session: "a" })
      },
      "steps[1].turn: an L2 entry is addressed by its session and turn"
    ],
    [
      "an L4 deletion without the text it matches",
      (s: Record<string, unknown>) => {
        stepsOf(s).push({ type: "deleteMemory", level: "L4" })
      },
      "steps[1].matching: an L4 entry is addressed by a text it contains"
    ],
    [
      "a filtered distribution without a filter",
      (s: Record<string, unknown>) => {
        stepsOf(s).push({ type: "distribute", mode: "filtered", task: { title: "x" } })
      },
      "steps[1].filter: mode filtered needs a filter (metadata pairs and/or a concept)"
    ]
  ])("refuses %s, naming the step's field", (_, edit, expected) => {
    expect(problem(edit)).toBe(`Invalid scenario tiny.json: ${expected}`)
  })

  it("lets aggregates and distributions list sessions nobody has (refusing them is what they test)", () => {
    expect(
      problem((s) => {
        stepsOf(s).push({ type: "aggregate", sessions: ["a", "b", "ghost"], query: "q" })
        stepsOf(s).push({ type: "distribute", mode: "broadcast", task: { title: "t" }, sessions: ["ghost"] })
      })
    ).toBe("ok")
  })

  it("counts the sessions of the data a tenant starts from as created", () => {
    const edit = (s: Record<string, unknown>) => {
      stepsOf(s)[0]!.session = "notebook-physics"
    }
    expect(problem(edit)).toMatch(/no session notebook-physics of tenant default/)
    expect(problem(edit, (tenant) => (tenant === "default" ? ["notebook-physics"] : []))).toBe("ok")
    expect(existingSessions({ data: { from: "fixtures/data" } }, repo)("default")).toEqual([
      "notebook-physics",
      "code-agent-auth"
    ])
    expect(existingSessions({ data: { from: "fixtures/data" } }, repo)("acme")).toEqual([])
  })
})
