/**
 * Many sessions into one request (`@ctxo/agent/Aggregate`): each session's build through the turn
 * engine's preview, merged and deduplicated by content with every provenance, ranked by relevance
 * to the query, cut to one budget counted exactly, rendered per format; ended sessions skipped and
 * contributing nothing; the sessions' L2 promoted to L3.
 */
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import { chatMessagesOf } from "@ctxo/compiler/Compile"
import * as MemoryStore from "@ctxo/store/MemoryStore"
import type * as Store from "@ctxo/store/Store"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, type Layer } from "effect"
import * as Aggregate from "../src/Aggregate.ts"
import { historyOf, servicesOver } from "./services.ts"

const SMALL = "test/small"
const models = {
  models: {
    [SMALL]: { contextWindow: 900, tokenizer: { kind: "exact" as const, encoding: "o200k_base" as const } }
  }
}

const layerOver = (store: Store.Service) => servicesOver(store, models)

const shared = "# Deploys\n\nThe deploy window is Friday 18:00 UTC, after the freeze.\n"
const manifest = JSON.stringify({ knowledge: [{ path: "notes.md" }] })
const fillers = (n: number, topic: string): Array<readonly [string, string]> =>
  Array.from({ length: n }, (_, i) => [
    `Status of ${topic} item ${i}: we looked at the dashboards and the logs again today.`,
    `Item ${i} of ${topic} is unchanged; nothing new in the dashboards or the logs.`
  ])

/** Three sessions: two share a knowledge file and a turn; `gone` is ended and holds a secret. */
const seeded = () =>
  Effect.gen(function* () {
    const store = MemoryStore.makeMemory({ global: { "system-prompt.md": "You are the release agent." } })
    for (const id of ["release", "infra", "gone"]) yield* store.createSession({ id, concept: id })
    yield* store.writeFile("release", "context-config.json", manifest)
    yield* store.writeFile("infra", "context-config.json", manifest)
    yield* store.writeFile("release", "notes.md", shared)
    yield* store.writeFile("infra", "notes.md", shared)
    yield* store.writeHistory(
      "release",
      historyOf([
        ...fillers(8, "release"),
        ["Please remember: the launch code for Orion is 7-4-1.", "Noted: Orion launch code 7-4-1."],
        ["Which team owns the rollback?", "The platform team owns the rollback."]
      ])
    )
    yield* store.writeHistory(
      "infra",
      historyOf([
        ...fillers(8, "infra"),
        ["Which team owns the rollback?", "The platform team owns the rollback."]
      ])
    )
    yield* store.writeHistory("gone", historyOf([["ZEBRA-SECRET: the old launch code was 9-9-9.", "Noted."]]))
    yield* store.updateSession("gone", { state: "ended" })
    return store
  })

const run = <A, E>(
  f: (store: Store.Service) => Effect.Effect<A, E, Layer.Layer.Success<ReturnType<typeof layerOver>>>
) =>
  Effect.gen(function* () {
    const store = yield* seeded()
    return yield* f(store).pipe(Effect.provide(layerOver(store)))
  })

const requestText = (r: Aggregate.Aggregated) => JSON.stringify(r.request)

describe("Aggregate: many sessions into one request", () => {
  it.effect("keeps one block for content two sessions share, with both provenances", () =>
    Effect.gen(function* () {
      const r = yield* run(() =>
        Aggregate.aggregate({
          sessions: ["release", "infra"],
          query: "When is the deploy window?",
          defaultModel: "gpt-4o"
        })
      )
      const deploy = r.blocks.filter((b) => b.provenance.some((p) => p.source === "knowledge"))
      expect(deploy).toHaveLength(1)
      expect(deploy[0]).toMatchObject({
        session: "release",
        sessions: ["release", "infra"],
        source: "knowledge"
      })
      expect(deploy[0]!.provenance.map((p) => p.session)).toEqual(["release", "infra"])
      expect(deploy[0]!.level).toBeUndefined()
      // The shared turn: one block, the L1 turn of both sessions.
      const rollback = r.blocks.filter((b) => b.provenance.some((p) => p.unit.startsWith("turn-")))
      const owners = rollback.filter((b) => b.sessions.length === 2)
      expect(owners).toHaveLength(1)
      expect(owners[0]!.provenance.map((p) => [p.session, p.level, p.source])).toEqual([
        ["release", "L1", "recent_history"],
        ["infra", "L1", "recent_history"]
      ])
      // Once in the request, under its first session's heading, naming both.
      const text = requestText(r)
      expect(text.split("The platform team owns the rollback.").length - 1).toBe(1)
      expect(text.split("The deploy window is Friday 18:00 UTC").length - 1).toBe(1)
      expect(text).toContain("### From release · knowledge")
      expect(text).toContain("; infra · knowledge")
    })
  )

  it.effect("an ended session is skipped with the reason and contributes nothing", () =>
    Effect.gen(function* () {
      const r = yield* run(() =>
        Aggregate.aggregate({
          sessions: ["gone", "release"],
          query: "What was the old launch code?",
          defaultModel: "gpt-4o"
        })
      )
      expect(r.skipped).toEqual([
        { session: "gone", reason: "ended", message: expect.stringContaining("ended") }
      ])
      expect(r.sessions.map((s) => s.session)).toEqual(["release"])
      expect(r.blocks.flatMap((b) => b.provenance.map((p) => p.session))).not.toContain("gone")
      expect(requestText(r)).not.toContain("ZEBRA")
      expect(requestText(r)).not.toContain("9-9-9")
    })
  )

  it.effect("a memory whose every origin is an ended session is withheld", () =>
    Effect.gen(function* () {
      const r = yield* run((store) =>
        Effect.gen(function* () {
          // `gone` was aggregated into L3 while it was active; now it is ended.
          yield* store.updateGlobalMemory(() => [
            {
              id: "L3:0123456789abcdef",
              level: "L3",
              text: "User: ZEBRA-SECRET: the old launch code was 9-9-9.\nAssistant: Noted.",
              importance: 0.9,
              reasons: ["aggregated from L2 across sessions"],
              sources: [{ session: "gone", turn: 1 }],
              createdAt: new Date().toISOString(),
              updatedAt: new Date().toISOString()
            }
          ])
          return yield* Aggregate.aggregate({
            sessions: ["release"],
            query: "What was the old launch code? ZEBRA-SECRET",
            defaultModel: "gpt-4o"
          })
        })
      )
      expect(requestText(r)).not.toContain("9-9-9")
      expect(r.sessions).toEqual([expect.objectContaining({ session: "release", withheld: 1 })])
    })
  )

  it.effect("cuts to one budget, counted exactly, never over the model's available input", () =>
    Effect.gen(function* () {
      const { r, recount } = yield* run(() =>
        Effect.gen(function* () {
          const r = yield* Aggregate.aggregate({
            sessions: ["release", "infra"],
            query: "What is the launch code for Orion?",
            model: SMALL,
            defaultModel: "gpt-4o"
          })
          // The request as sent, counted again from scratch with the model's tokenizer.
          const model = yield* (yield* ModelRegistry.ModelRegistry).resolve(SMALL)
          const counter = yield* (yield* Tokenizer.Tokenizer).counter(model)
          const messages = r.format === "openai" ? r.request.messages : []
          return {
            r,
            recount: counter.countMessages(chatMessagesOf({ format: "openai", request: { messages } }))
          }
        })
      )
      // 900 window less the 10% reserve.
      expect(r.report.available).toBe(810)
      expect(r.report.total).toBeLessThanOrEqual(r.report.available)
      expect(recount).toBe(r.report.total)
      // Something had to go, and says why; what stays is whole.
      const dropped = r.blocks.filter((b) => b.status === "dropped")
      expect(dropped.length).toBeGreaterThan(0)
      for (const b of dropped) expect(b.reason).toMatch(/grant of sessions|counted whole/)
      const kept = r.blocks.filter((b) => b.status === "included")
      expect(kept.length).toBeGreaterThan(0)
      // The system prompt and the query are always there.
      expect(requestText(r)).toContain("You are the release agent.")
      expect(requestText(r)).toContain("What is the launch code for Orion?")
      // Ranking: the block that answers the question is in, first.
      expect(r.blocks[0]!.status).toBe("included")
      expect(r.blocks[0]!.provenance[0]).toMatchObject({ session: "release", level: "L1" })
      expect(requestText(r)).toContain("Orion launch code 7-4-1")
      expect(r.blocks[0]!.score).toBeGreaterThan(0)
      for (const b of dropped) expect(b.score).toBeLessThanOrEqual(r.blocks[0]!.score)
    })
  )

  it.effect("every block says where it comes from", () =>
    Effect.gen(function* () {
      const r = yield* run(() =>
        Aggregate.aggregate({
          sessions: ["release", "infra"],
          query: "Who owns the rollback, and when do we deploy?",
          defaultModel: "gpt-4o"
        })
      )
      expect(r.blocks.length).toBeGreaterThan(4)
      for (const b of r.blocks) {
        expect(["release", "infra"]).toContain(b.session)
        expect(b.provenance.length).toBeGreaterThan(0)
        expect(b.provenance[0]).toMatchObject({ session: b.session, source: b.source })
        for (const p of b.provenance) {
          expect(p.source).not.toBe("")
          expect(p.unit).not.toBe("")
          expect(b.sessions).toContain(p.session)
        }
        if (b.provenance[0]!.unit.startsWith("turn-")) expect(b.level).toBe("L1")
      }
      // With room for everything, everything is in.
      expect(r.blocks.every((b) => b.status === "included")).toBe(true)
      expect(r.report.total).toBeLessThanOrEqual(r.report.available)
    })
  )

  it.effect("renders the one request in the format asked for", () =>
    Effect.gen(function* () {
      const ask = (format: "openai" | "anthropic" | "react") =>
        run(() =>
          Aggregate.aggregate({
            sessions: ["release"],
            query: "When is the deploy window?",
            defaultModel: "gpt-4o",
            format
          })
        )
      const openai = yield* ask("openai")
      expect(openai.format).toBe("openai")
      if (openai.format === "openai")
        expect(openai.request.messages.map((m) => m.role)).toEqual(["system", "system", "user"])
      const anthropic = yield* ask("anthropic")
      expect(anthropic.format).toBe("anthropic")
      if (anthropic.format === "anthropic") {
        expect(anthropic.request.system).toContain("You are the release agent.")
        expect(anthropic.request.system).toContain("## Session release")
        expect(anthropic.request.messages).toEqual([
          { role: "user", content: [{ type: "text", text: "When is the deploy window?" }] }
        ])
      }
      const react = yield* ask("react")
      expect(
        react.format === "react" && react.request.prompt.endsWith("[user] When is the deploy window?")
      ).toBe(true)
    })
  )

  it.effect("promotes the contributing sessions' L2 to L3", () =>
    Effect.gen(function* () {
      const { r, l3 } = yield* run((store) =>
        Effect.gen(function* () {
          const r = yield* Aggregate.aggregate({
            sessions: ["release", "infra", "gone"],
            query: "anything about Orion?",
            defaultModel: "gpt-4o"
          })
          return { r, l3: (yield* store.readGlobalMemory).filter((e) => e.level === "L3") }
        })
      )
      expect(r.promoted).toBeGreaterThan(0)
      expect(l3.length).toBe(r.promoted)
      expect(l3.some((e) => e.text.includes("Orion") && e.sources.some((s) => s.session === "release"))).toBe(
        true
      )
      expect(l3.flatMap((e) => e.sources.map((s) => s.session))).not.toContain("gone")
    })
  )

  it.effect("refuses an empty list, an empty query (naming the field) and an unknown session", () =>
    Effect.gen(function* () {
      const none = yield* run(() =>
        Aggregate.aggregate({ sessions: [], query: "hi", defaultModel: "gpt-4o" }).pipe(Effect.flip)
      )
      expect(none).toMatchObject({ _tag: "InvalidControllerInput", field: "sessions" })
      expect(none.message).toMatch(/^sessions: /)
      const blank = yield* run(() =>
        Aggregate.aggregate({ sessions: ["release"], query: "  ", defaultModel: "gpt-4o" }).pipe(Effect.flip)
      )
      expect(blank).toMatchObject({ _tag: "InvalidControllerInput", field: "query" })
      const unknown = yield* run((store) =>
        Effect.gen(function* () {
          const error = yield* Aggregate.aggregate({
            sessions: ["release", "nope"],
            query: "hi",
            defaultModel: "gpt-4o"
          }).pipe(Effect.flip)
          // Nothing was compiled or promoted.
          return { error, global: yield* store.readGlobalMemory }
        })
      )
      expect(unknown.error).toMatchObject({ _tag: "SessionNotFound", sessionId: "nope" })
      expect(unknown.global).toEqual([])
    })
  )
})

describe("Aggregate: the pure stages", () => {
  const p = (session: string, unit: string, source = "knowledge") => ({
    session,
    source,
    unit,
    layer: "knowledge__context"
  })

  it("merges by normalized content in the order seen", () => {
    const merged = Aggregate.mergeBlocks([
      [
        { content: "Alpha  beta", provenance: p("a", "x") },
        { content: "gamma", provenance: p("a", "y") }
      ],
      [{ content: "alpha beta\n", provenance: p("b", "z") }]
    ])
    expect(merged.map((m) => [m.content, m.provenance.map((x) => x.session), m.seen])).toEqual([
      ["Alpha  beta", ["a", "b"], 0],
      ["gamma", ["a"], 1]
    ])
  })

  it("ranks by relevance, then by the sessions a block came from, then the order seen", () => {
    const merged = Aggregate.mergeBlocks([
      [
        { content: "one", provenance: p("a", "1") },
        { content: "two", provenance: p("a", "2") },
        { content: "the answer is here", provenance: p("a", "3") }
      ],
      [{ content: "two", provenance: p("b", "2") }]
    ])
    const ranked = Aggregate.rankBlocks(merged, "answer", (query, docs) =>
      docs.filter((d) => d.text.includes(query)).map((d) => ({ id: d.id, score: 1 }))
    )
    expect(ranked.map((b) => b.content)).toEqual(["the answer is here", "two", "one"])
  })

  it("groups kept blocks under their first session, each headed with every provenance", () => {
    const ranked = Aggregate.rankBlocks(
      Aggregate.mergeBlocks([
        [{ content: "shared fact", provenance: p("a", "k1") }],
        [
          {
            content: "shared fact",
            provenance: { ...p("b", "turn-2", "recent_history"), level: "L1" as const }
          },
          { content: "b only", provenance: p("b", "k2") }
        ]
      ]),
      "",
      () => []
    )
    const text = Aggregate.contextText(["a", "b", "c"], ranked)
    expect(text).toBe(
      [
        "Context from sessions a, b for the question below; each block names the sessions, memory levels and sources it comes from.",
        "## Session a\n\n### From a · knowledge · k1; b · L1 · recent_history · turn-2\nshared fact",
        "## Session b\n\n### From b · knowledge · k2\nb only"
      ].join("\n\n")
    )
  })

  it("says which level a block of a session's compile is", () => {
    const base = { source: "x", status: "included" as const, tokens: 1, text: "t", content: "t" }
    expect(Aggregate.levelOf({ ...base, kind: "context", layer: "memory__context", id: "L4:ab" })).toBe("L4")
    expect(Aggregate.levelOf({ ...base, kind: "context", layer: "memory__context", id: "L3:ab" })).toBe("L3")
    expect(
      Aggregate.levelOf({ ...base, kind: "context", layer: "important_memory__context", id: "L2:s:t1" })
    ).toBe("L2")
    expect(Aggregate.levelOf({ ...base, kind: "context", layer: "compression__context", id: "s1" })).toBe(
      "L2"
    )
    expect(
      Aggregate.levelOf({ ...base, kind: "context", layer: "recall__context", id: "recalled-turn-2" })
    ).toBe("L1")
    expect(
      Aggregate.levelOf({ ...base, kind: "context", layer: "knowledge__context", id: "n.md" })
    ).toBeUndefined()
    expect(
      Either.isLeft(
        Aggregate.validate({ sessions: Array.from({ length: 101 }, (_, i) => `s${i}`), query: "q" })
      )
    ).toBe(true)
  })
})
