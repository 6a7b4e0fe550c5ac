import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { encodeSidecar, syncBlockIds } from "@ctxo/blocks/BlockIds"
import { parseMarkdownBlocks } from "@ctxo/blocks/MarkdownBlocks"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import { emptyHistory, type HistoryDocument, type Message } from "@ctxo/history/Message"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import type { CompileOptions } from "../src/Compile.ts"
import { compile } from "../src/Compile.ts"
import * as CompileCache from "../src/CompileCache.ts"
import type { Format } from "../src/Render.ts"
import * as Workspace from "../src/Workspace.ts"

const exampleData = fileURLToPath(new URL("../../../fixtures/data", import.meta.url))
const filesOf = (dir: string, prefix = ""): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const entry of readdirSync(join(dir, prefix), { withFileTypes: true })) {
    const path = prefix === "" ? entry.name : `${prefix}/${entry.name}`
    if (entry.isDirectory()) Object.assign(out, filesOf(dir, path))
    else out[path] = readFileSync(join(dir, path), "utf8")
  }
  return out
}

// The notebook session (history, profile blocks, references, a session prompt) with knowledge
// files and a named block with its block-id sidecar, so every cache of a compile has work to do.
const notebook = filesOf(join(exampleData, "notebook-physics"))
const truth = notebook["ground-truth.md"]!
const truthIds = syncBlockIds(parseMarkdownBlocks(truth, "ground-truth.md"), undefined, "ground-truth.md")
const manifest = {
  ...JSON.parse(notebook["context-config.json"]!),
  knowledge: [{ path: "notes/*.md" }, { path: "ground-truth.md", block: "薛定谔方程" }]
}
const files: Workspace.MemoryFiles = {
  global: {
    "system-prompt.md": readFileSync(join(exampleData, "system-prompt.md"), "utf8"),
    "profile.md": readFileSync(join(exampleData, "profile.md"), "utf8")
  },
  sessions: {
    physics: {
      ...notebook,
      "context-config.json": JSON.stringify(manifest),
      "ground-truth.md.blocks.json": encodeSidecar(truthIds.sidecar),
      "notes/a.md":
        "# Waves\n\nA wave function describes a state.\n\n# Operators\n\nObservables are operators.\n",
      "notes/b.md": "# Units\n\nħ has units of action.\n"
    }
  }
}

const services = (data: Workspace.MemoryFiles = files, root?: string) =>
  Layer.mergeAll(Workspace.layerMemory(data, root), ModelRegistry.layer(), Tokenizer.layer())

const options: CompileOptions = { sessionId: "physics" }

/** A compile with the given cache (none: the compile's own, fresh). */
const compileWith = (
  cache: CompileCache.Service | undefined,
  opts: CompileOptions = options,
  data?: Workspace.MemoryFiles,
  root?: string
) => {
  const compiled = compile(opts).pipe(Effect.provide(services(data, root)))
  return cache === undefined ? compiled : Effect.provideService(compiled, CompileCache.CompileCache, cache)
}

const hits = (stats: CompileCache.CompileCacheStats) => Object.values(stats).reduce((n, s) => n + s.hits, 0)

describe("CompileCache", () => {
  it.effect("a second compile of the same session reuses the first one's work", () =>
    Effect.gen(function* () {
      const cache = CompileCache.make()
      const first = yield* compileWith(cache)
      const cold = cache.stats()
      // The first compile did the work: the history decoded once, every file parsed once.
      expect(cold.histories).toEqual({ hits: 0, misses: 1 })
      expect(cold.manifests).toEqual({ hits: 0, misses: 1 })
      expect(cold.knowledge.misses).toBe(3)
      expect(cold.profiles.misses).toBe(1)
      expect(cold.sidecars.misses).toBeGreaterThan(0)
      expect(cold.turnTexts.misses).toBeGreaterThan(0)
      expect(cold.turnUnits.misses).toBeGreaterThan(0)

      const second = yield* compileWith(cache, { ...options, previous: first.state })
      const warm = cache.stats()
      // Nothing decoded, parsed, split or counted again: every lookup answered from the cache...
      const byContent = [
        "manifests",
        "histories",
        "views",
        "sidecars",
        "knowledge",
        "profiles",
        "turnTexts",
        "turnTokens"
      ] as const
      for (const name of byContent) expect([name, warm[name].misses]).toEqual([name, cold[name].misses])
      // ...but for the few small layers made afresh (system prompts, the input, inline contexts):
      // at most one lookup each; the history's and the knowledge's hit.
      const fresh = first.composition.layers.filter((l) => l._tag !== "history").length
      for (const name of ["renderedTokens", "renderedHashes", "contextTokens", "unitHashes"] as const) {
        expect([name, warm[name].misses - cold[name].misses <= fresh]).toEqual([name, true])
        expect([name, warm[name].hits > cold[name].hits]).toEqual([name, true])
      }
      expect(warm.histories).toEqual({ hits: 1, misses: 1 })
      expect(warm.manifests).toEqual({ hits: 1, misses: 1 })
      expect(warm.knowledge.hits).toBe(3)
      // Each turn's unit the first compile made is the second's: its text and tokens not looked up again.
      expect(warm.turnUnits.misses).toBe(cold.turnUnits.misses)
      expect(warm.turnUnits.hits).toBeGreaterThanOrEqual(cold.turnUnits.hits + cold.turnUnits.misses)
      expect(warm.turnTexts.hits).toBe(cold.turnTexts.hits)
      expect(second.request).toEqual(first.request)
      expect(second.prefix.unchangedMessages).toBe(
        second.format === "openai" ? second.request.messages.length : -1
      )
    })
  )

  it.effect("the layer is one cache for every compile under it", () =>
    Effect.gen(function* () {
      const cache = yield* CompileCache.CompileCache
      yield* compile(options)
      yield* compile(options)
      expect(cache.stats().histories).toEqual({ hits: 1, misses: 1 })
    }).pipe(Effect.provide(Layer.merge(services(), CompileCache.layer)))
  )

  it.effect("two caches share nothing", () =>
    Effect.gen(function* () {
      const a = CompileCache.make()
      const b = CompileCache.make()
      yield* compileWith(a)
      const afterA = a.stats()
      yield* compileWith(b)
      // b starts as cold as a did (the same lookups, the same misses), and a saw none of it.
      expect(b.stats()).toEqual(afterA)
      expect(b.stats().histories).toEqual({ hits: 0, misses: 1 })
      expect(a.stats()).toEqual(afterA)
      // Two layers are two caches.
      const [x, y] = yield* Effect.all(
        [CompileCache.CompileCache, CompileCache.CompileCache].map((tag) =>
          Effect.provide(tag, CompileCache.layer)
        )
      )
      expect(x).not.toBe(y)
    })
  )

  it.effect("a compile with no cache gives byte for byte what a compile with a warm cache gives", () =>
    Effect.gen(function* () {
      const cache = CompileCache.make()
      for (const format of ["openai", "anthropic", "react"] satisfies ReadonlyArray<Format>) {
        const opts = { ...options, format }
        yield* compileWith(cache, opts)
        const warm = yield* compileWith(cache, opts)
        const none = yield* compileWith(undefined, opts)
        expect(JSON.stringify(none)).toBe(JSON.stringify(warm))
      }
      expect(hits(cache.stats())).toBeGreaterThan(0)
    })
  )

  it.effect("a history grown by one turn is joined, hashed and counted for that turn alone", () =>
    Effect.gen(function* () {
      const cache = CompileCache.make()
      const turnOf = (turn: number): ReadonlyArray<Message> => [
        {
          id: `u${turn}`,
          role: "user",
          parts: [{ _tag: "text", text: `Question ${turn}?` }],
          meta: { turn, kind: "input" }
        },
        {
          id: `a${turn}`,
          role: "assistant",
          parts: [{ _tag: "text", text: `Answer ${turn}.` }],
          meta: { turn, kind: "final", finished: true }
        }
      ]
      // Documents as the recorder makes them: immutable, each keeping the messages before its change.
      let doc: HistoryDocument = { ...emptyHistory, messages: [] }
      for (let turn = 1; turn <= 40; turn++) doc = { ...doc, messages: [...doc.messages, ...turnOf(turn)] }
      const first = yield* compileWith(cache, { ...options, history: doc, query: "What next?" })
      const before = cache.stats()
      const grown = { ...doc, messages: [...doc.messages, ...turnOf(41)] }
      const second = yield* compileWith(cache, {
        ...options,
        history: grown,
        query: "And then?",
        previous: first.state
      })
      const after = cache.stats()
      // The new turn's text and tokens; the 40 before it answered from the cache.
      expect(after.turnTexts.misses - before.turnTexts.misses).toBe(1)
      expect(after.turnTokens.misses - before.turnTokens.misses).toBe(1)
      expect(JSON.stringify(second)).toBe(
        JSON.stringify(
          yield* compileWith(undefined, {
            ...options,
            history: grown,
            query: "And then?",
            previous: first.state
          })
        )
      )
    })
  )

  it.effect("entries answer only for the same content: data roots and edits never see another's", () =>
    Effect.gen(function* () {
      const cache = CompileCache.make()
      const history = (answer: string) =>
        JSON.stringify([
          { role: "user", content: "What is a wave function?" },
          { role: "assistant", content: answer }
        ])
      const tenant = (answer: string, note: string): Workspace.MemoryFiles => ({
        global: files.global,
        sessions: {
          physics: {
            ...files.sessions.physics,
            "messages.json": history(answer),
            "notes/a.md": `# Waves\n\n${note}\n`
          }
        }
      })
      const a = tenant("A state of the system.", "Tenant A's note.")
      const b = tenant("Tenant B's answer.", "Tenant B's note.")
      // The same session id in two data roots, one cache: each compile sees its own files.
      for (const [data, root] of [
        [a, "tenants/a"],
        [b, "tenants/b"],
        [a, "tenants/a"],
        [b, "tenants/a"] // the same root with its files edited
      ] as const) {
        const cached = yield* compileWith(cache, options, data, root)
        const fresh = yield* compileWith(undefined, options, data, root)
        expect(JSON.stringify(cached)).toBe(JSON.stringify(fresh))
      }
      const stats = cache.stats()
      // a, then b: decoded; a again: its own entry; a's root with b's text: decoded again.
      expect(stats.histories).toEqual({ hits: 1, misses: 3 })
    })
  )
})
