/**
 * The turn engine on its own (memory store, a scripted model): per-session state stays bounded,
 * the compaction trigger comes from the usage recorded in history (so a restarted engine compacts
 * as the old one would have), and an input that cannot fit is refused with nothing recorded. On
 * the file store, the input's fdatasync runs while its first request compiles, and the turn says
 * nothing before it is done.
 */

import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { open } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import { compile } from "@ctxo/compiler/Compile"
import * as Workspace from "@ctxo/compiler/Workspace"
import { HistoryIOError } from "@ctxo/history/HistoryErrors"
import * as HistoryStore from "@ctxo/history/HistoryStore"
import * as Summarizer from "@ctxo/history/Summarizer"
import * as MemoryStore from "@ctxo/store/MemoryStore"
import * as Store from "@ctxo/store/Store"
import { afterAll, describe, expect, it, vi } from "@effect/vitest"
import { Effect, FiberRef, Layer, ManagedRuntime } from "effect"
import * as Memory from "../src/Memory.ts"
import * as TurnEngine from "../src/TurnEngine.ts"

const sessions = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`s${i}`, {}]))
const files = { global: { "system-prompt.md": "You are a careful assistant." }, sessions }
const services = Layer.mergeAll(
  MemoryStore.layerMemory(files),
  Workspace.layerMemory(files),
  Summarizer.layerDeterministic,
  ModelRegistry.layer(),
  Tokenizer.layer(),
  TurnEngine.seamsLive
).pipe(Layer.provideMerge(HistoryStore.layerMemory))

const answer = (text: string, usage?: { inputTokens: number; outputTokens: number }): TurnEngine.Driver => ({
  model: () => Effect.succeed({ text, toolCalls: [], ...(usage === undefined ? {} : { usage }) })
})
const options: TurnEngine.TurnOptions = { defaultModel: "openai/gpt-4o", maxSteps: 4 }

/** An engine whose history reads go through `load` (made from the test store's own), and the layer its turns run with. */
const engineWithLoad = (load: (history: HistoryStore.Service) => HistoryStore.Service["load"]) =>
  Effect.gen(function* () {
    const history = yield* HistoryStore.HistoryStore
    const layer = Layer.succeed(HistoryStore.HistoryStore, { ...history, load: load(history) })
    return { history, layer, engine: yield* TurnEngine.make.pipe(Effect.provide(layer)) }
  })

describe("TurnEngine", () => {
  it.effect("keeps per-session state for a bounded number of sessions", () =>
    Effect.gen(function* () {
      const engine = yield* TurnEngine.makeWith({ maxSessions: 3 })
      for (let i = 0; i < 12; i++) {
        yield* engine.turn({ sessionId: `s${i}`, input: `hello ${i}` }, answer("hi"), options)
        expect(engine.sessions()).toBeLessThanOrEqual(3)
      }
      expect(engine.sessions()).toBe(3)
    }).pipe(Effect.provide(services))
  )

  it.effect(
    "keeps the last compile of a bounded number of sessions; another one compiles afresh to the same request",
    () =>
      Effect.gen(function* () {
        const bounded = yield* TurnEngine.makeWith({ maxCompiledSessions: 2 })
        const unbounded = yield* TurnEngine.make
        const sent: Array<unknown> = []
        const recording: TurnEngine.Driver = {
          model: (compiled) =>
            Effect.sync(() => {
              sent.push(compiled.request)
              return { text: "noted", toolCalls: [] }
            })
        }
        // The same first turn in s0-s5 on the bounded engine and in s6 on the other.
        for (let i = 0; i < 6; i++) {
          yield* bounded.turn({ sessionId: `s${i}`, input: "first" }, answer("hi"), options)
          expect(bounded.compiledSessions()).toBeLessThanOrEqual(2)
        }
        yield* unbounded.turn({ sessionId: "s6", input: "first" }, answer("hi"), options)
        expect(bounded.sessions()).toBe(6)
        expect(bounded.compiledSessions()).toBe(2)
        // s0's last compile is gone: its next turn is compiled whole, and sends what the engine that
        // kept s6's sends for the same history.
        yield* bounded.turn({ sessionId: "s0", input: "second" }, recording, options)
        yield* unbounded.turn({ sessionId: "s6", input: "second" }, recording, options)
        expect(sent).toHaveLength(2)
        expect(sent[0]).toEqual(sent[1])
        expect(bounded.compiledSessions()).toBe(2)
      }).pipe(Effect.provide(services))
  )

  it.effect("keeps two tenants' sessions of the same id apart (state keyed by the store's scope)", () =>
    Effect.gen(function* () {
      // A gateway's store forwards to the request's tenant: its scope is the tenant's data root.
      const tenant = FiberRef.unsafeMake("a")
      const store = yield* Store.Store
      const forwarding = Layer.succeed(Store.Store, {
        ...store,
        scope: Effect.map(FiberRef.get(tenant), (t) => `tenants/${t}`)
      })
      const engine = yield* TurnEngine.make.pipe(Effect.provide(forwarding))
      const ofA = yield* engine.tracker("s0")
      const ofB = yield* engine.tracker("s0").pipe(Effect.locally(tenant, "b"))
      expect(ofB).not.toBe(ofA)
      expect(yield* engine.tracker("s0")).toBe(ofA)
      expect(engine.sessions()).toBe(2)
      yield* engine.reset("s0").pipe(Effect.locally(tenant, "b"))
      expect(engine.sessions()).toBe(1)
      expect(yield* engine.tracker("s0")).toBe(ofA)
    }).pipe(Effect.provide(services))
  )

  it.effect("previews the next turn's first request, recording nothing; the turn then sends the same", () =>
    Effect.gen(function* () {
      const engine = yield* TurnEngine.make
      const history = yield* HistoryStore.HistoryStore
      yield* engine.turn({ sessionId: "s5", input: "first question" }, answer("first answer"), options)
      const before = yield* history.load("s5")
      const shown = yield* engine.preview({
        sessionId: "s5",
        input: "second question",
        defaultModel: "openai/gpt-4o"
      })
      expect(yield* history.load("s5")).toEqual(before)
      let sent: unknown
      yield* engine.turn(
        { sessionId: "s5", input: "second question" },
        {
          model: (compiled) =>
            Effect.sync(() => {
              sent = compiled.request
              return { text: "second answer", toolCalls: [] }
            })
        },
        options
      )
      expect(sent).toEqual(shown.request)
    }).pipe(Effect.provide(services))
  )

  it.effect("drops the state of idle sessions", () =>
    Effect.gen(function* () {
      const engine = yield* TurnEngine.makeWith({ idleMs: 0 })
      yield* engine.turn({ sessionId: "s0", input: "one" }, answer("a"), options)
      yield* engine.turn({ sessionId: "s1", input: "two" }, answer("b"), options)
      expect(engine.sessions()).toBe(1)
    }).pipe(Effect.provide(services))
  )

  it.effect(
    "reads a session's history once a turn besides its records (under the lock), and still sees a change made between turns",
    () =>
      Effect.gen(function* () {
        let loads = 0
        const {
          history,
          layer: counting,
          engine
        } = yield* engineWithLoad(
          (history) => (sessionId) =>
            Effect.zipRight(
              Effect.sync(() => loads++),
              history.load(sessionId)
            )
        )
        const sent: Array<string> = []
        const recording: TurnEngine.Driver = {
          model: (compiled) =>
            Effect.sync(() => {
              sent.push(JSON.stringify(compiled.request))
              return { text: `answer ${sent.length}`, toolCalls: [] }
            })
        }
        // How many of a request's first messages the engine found unchanged since its last compile
        // of the session (0 when it holds none for the history it reads).
        const unchanged: Array<number> = []
        const turn = (input: string) =>
          engine
            .turn({ sessionId: "s7", input }, recording, {
              ...options,
              onCompiled: (compiled) =>
                Effect.sync(() => void unchanged.push(compiled.prefix.unchangedMessages))
            })
            .pipe(Effect.provide(counting))
        yield* turn("first question")
        loads = 0
        yield* turn("second question")
        expect(loads).toBe(1)
        // Another writer between turns (the session's files API, another process): the next turn's
        // request shows its change, read under the lock.
        yield* history.modify("s7", (doc) =>
          Effect.succeed([
            undefined,
            {
              ...doc,
              messages: doc.messages.map((m) =>
                m.meta.kind === "final" && m.meta.turn === 1
                  ? { ...m, parts: [{ _tag: "text" as const, text: "an answer edited elsewhere" }] }
                  : m
              )
            }
          ] as const)
        )
        loads = 0
        yield* turn("third question")
        expect(loads).toBe(1)
        expect(sent.at(-1)).toContain("an answer edited elsewhere")
        expect(sent.at(-1)).not.toContain('"answer 1"')
        expect(sent.at(-2)).toContain('"answer 1"')
        // Each request carries its own turn's input (the first step compiles the recorded input).
        expect(
          sent.map((r) =>
            ["first question", "second question", "third question"].filter((q) => r.includes(q))
          )
        ).toEqual([
          ["first question"],
          ["first question", "second question"],
          ["first question", "second question", "third question"]
        ])
        // The compile state kept from the second turn is not used for a history changed since.
        expect(unchanged[1]).toBeGreaterThan(0)
        expect(unchanged[2]).toBe(0)
      }).pipe(Effect.provide(services))
  )

  it.effect(
    "answers a turn whose history cannot be read once its answer is recorded, recording it once",
    () =>
      Effect.gen(function* () {
        // Reads fail while the history ends with turn 2's answer (a disk or a database gone a moment).
        const {
          history,
          layer: failing,
          engine
        } = yield* engineWithLoad(
          (history) => (sessionId) =>
            Effect.flatMap(history.load(sessionId), (doc) => {
              const last = doc.messages.at(-1)
              return sessionId === "s8" && last?.meta.kind === "final" && last.meta.turn === 2
                ? Effect.fail(
                    new HistoryIOError({
                      file: `${sessionId}/messages.json`,
                      operation: "read",
                      reason: "EIO"
                    })
                  )
                : Effect.succeed(doc)
            })
        )
        const turn = (input: string, text: string) =>
          engine.turn({ sessionId: "s8", input }, answer(text), options).pipe(Effect.provide(failing))
        yield* turn("first question", "first answer")
        const second = yield* turn("second question", "second answer")
        expect(second).toMatchObject({ _tag: "Answered", turn: 2, text: "second answer" })
        const doc = yield* history.load("s8")
        expect(doc.messages.map((m) => `${m.meta.turn}:${m.meta.kind}`)).toEqual([
          "1:input",
          "1:final",
          "2:input",
          "2:final"
        ])
      }).pipe(Effect.provide(services))
  )

  it.effect("compacts from the usage recorded in history, also after a restart", () =>
    Effect.gen(function* () {
      const events: Array<string> = []
      const small = {
        ...options,
        compaction: { window: 2_000, keepTurns: 1 },
        emit: (e: TurnEngine.TurnEvent) => Effect.sync(() => void events.push(e.type))
      }
      const first = yield* TurnEngine.make
      yield* first.turn(
        { sessionId: "s2", input: "first" },
        answer("ok", { inputTokens: 100, outputTokens: 5 }),
        small
      )
      yield* first.turn(
        { sessionId: "s2", input: "second" },
        answer("ok", { inputTokens: 1_900, outputTokens: 50 }),
        small
      )
      expect(events).not.toContain("compaction-started")
      // A new engine (a restarted gateway) reads the last usage from history: 1,950 of 2,000.
      const restarted = yield* TurnEngine.make
      yield* restarted.turn({ sessionId: "s2", input: "third" }, answer("ok"), small)
      expect(events).toContain("compaction-started")
      const doc = yield* Effect.flatMap(HistoryStore.HistoryStore, (h) => h.load("s2"))
      expect(doc.compression).toHaveLength(1)
    }).pipe(Effect.provide(services))
  )

  it.effect(
    "leaves an Anthropic request under the trigger after compaction (history counted as Anthropic sends it)",
    () =>
      Effect.gen(function* () {
        // Each turn reads a list of records: in an Anthropic request a tool result is a JSON string
        // inside a JSON content block (its quotes escaped), beside block types and ids, about a tenth
        // more than its text. The summary takes all the room compaction keeps for it.
        const window = 12_000
        const trigger = Math.floor(0.8 * window)
        const firstRequest = new Map<number, number>()
        const compactions: Array<{ turn: number; stillOver: boolean }> = []
        const records = Array.from({ length: 12 }, (_, i) => ({
          id: `inv_${i}`,
          status: "paid",
          total: 100 + i
        }))
        const driver: TurnEngine.Driver = {
          model: (compiled, { turn, step }) =>
            Effect.sync(() => {
              if (step === 1) firstRequest.set(turn, compiled.report.total ?? 0)
              return step === 1
                ? { text: "", toolCalls: [{ id: `call_${turn}`, name: "query_invoices", arguments: "{}" }] }
                : {
                    text: `Turn ${turn}: all paid.`,
                    toolCalls: [],
                    usage: { inputTokens: compiled.report.total ?? 0, outputTokens: 10 }
                  }
            }),
          runTool: () => Effect.succeed({ status: "success", data: { rows: records } })
        }
        const engine = yield* TurnEngine.make
        const turnOptions: TurnEngine.TurnOptions = {
          defaultModel: "anthropic/claude-sonnet-4-5",
          format: "anthropic",
          maxSteps: 4,
          compaction: { window, keepTurns: 40 },
          onCompaction: (result, before) =>
            Effect.sync(() => {
              if (result.status === "compacted")
                compactions.push({
                  turn: (before.messages.at(-1)?.meta.turn ?? 0) + 1,
                  stillOver: result.stillOver
                })
            })
        }
        // Turns until the first compaction (it runs at the start of a turn, before its first request).
        for (let i = 1; compactions.length === 0 && i <= 40; i++)
          yield* engine.turn(
            { sessionId: "s7", input: `Are invoices of batch ${i} paid?` },
            driver,
            turnOptions
          )
        expect(compactions).toHaveLength(1)
        const [compaction] = compactions
        expect(compaction!.stillOver).toBe(false)
        expect(firstRequest.get(compaction!.turn)).toBeLessThanOrEqual(trigger)
      }).pipe(
        Effect.provide(
          Layer.succeed(Summarizer.Summarizer, {
            summarize: () =>
              Effect.succeed(
                Array.from({ length: 400 }, (_, i) => `* [✓] checked batch ${i}: every invoice paid`).join(
                  "\n"
                )
              )
          })
        ),
        Effect.provide(services)
      )
  )

  it.effect("refuses an input that cannot fit before anything is recorded or archived", () =>
    Effect.gen(function* () {
      const engine = yield* TurnEngine.make
      yield* engine.turn(
        { sessionId: "s3", input: "small" },
        answer("ok", { inputTokens: 120_000, outputTokens: 10 }),
        options
      )
      const history = yield* HistoryStore.HistoryStore
      const before = yield* history.load("s3")
      let called = false
      const error = yield* Effect.flip(
        engine.turn(
          { sessionId: "s3", input: "word ".repeat(200_000) },
          {
            model: () =>
              Effect.sync(() => {
                called = true
                return { text: "", toolCalls: [] }
              })
          },
          options
        )
      )
      expect(error._tag).toBe("BudgetExceeded")
      expect(called).toBe(false)
      expect(yield* history.load("s3")).toEqual(before)
    }).pipe(Effect.provide(services))
  )

  it.effect(
    "refuses an input compaction's estimate takes for small (Chinese, about a token a character) when the first compile finds it cannot fit: history as before, nothing said",
    () =>
      Effect.gen(function* () {
        const engine = yield* TurnEngine.make
        const history = yield* HistoryStore.HistoryStore
        const model = "openai/gpt-4"
        yield* engine.turn({ sessionId: "s8", input: "hello", model }, answer("hi"), options)
        const before = yield* history.load("s8")
        const text = overGpt4Window()
        const said: Array<string> = []
        const error = yield* Effect.flip(
          engine.turn(
            { sessionId: "s8", input: text, model },
            {
              model: () =>
                Effect.sync(() => {
                  said.push("model")
                  return { text: "", toolCalls: [] }
                })
            },
            { ...options, emit: (event) => Effect.sync(() => void said.push(event.type)) }
          )
        )
        expect(error._tag).toBe("BudgetExceeded")
        expect(said).toEqual([])
        expect(yield* history.load("s8")).toEqual(before)
        // The session goes on: the next turn is turn 2.
        const next = yield* engine.turn(
          { sessionId: "s8", input: "and now?", model },
          answer("fine"),
          options
        )
        expect(next.turn).toBe(2)
      }).pipe(Effect.provide(services))
  )

  it.effect("refuses an input that fits alone but not beside the pinned turns, recording nothing", () =>
    Effect.gen(function* () {
      const engine = yield* TurnEngine.make
      const history = yield* HistoryStore.HistoryStore
      yield* engine.turn({ sessionId: "s4", input: "pinned ".repeat(80_000) }, answer("noted"), options)
      yield* engine.turn(
        { sessionId: "s4", input: "small" },
        answer("ok", { inputTokens: 100_000, outputTokens: 10 }),
        options
      )
      yield* history.modify("s4", (doc) =>
        Effect.succeed([
          undefined,
          {
            ...doc,
            messages: doc.messages.map((m) =>
              m.meta.turn === 1 && m.meta.kind === "input" ? { ...m, meta: { ...m.meta, pinned: true } } : m
            )
          }
        ] as const)
      )
      const before = yield* history.load("s4")
      // 50k tokens fit gpt-4o's window alone, not beside the 80k-token pinned turn.
      const error = yield* Effect.flip(
        engine.turn({ sessionId: "s4", input: "word ".repeat(50_000) }, answer("never"), options)
      )
      expect(error._tag).toBe("BudgetExceeded")
      expect(yield* history.load("s4")).toEqual(before)
    }).pipe(Effect.provide(services))
  )
})

/** A turn answered "hi", noting in `said` what it says (its events) and when it calls the model. */
const notedTurn = (engine: TurnEngine.Service, sessionId: string, said: Array<string>) =>
  engine.turn(
    { sessionId, input: "hello" },
    {
      model: () =>
        Effect.sync(() => {
          said.push("model")
          return { text: "hi", toolCalls: [] }
        })
    },
    { ...options, emit: (event) => Effect.sync(() => void said.push(event.type)) }
  )

describe("the turn's number", () => {
  it.effect(
    "comes after the first compile, which checks the input when compaction will not run (on a store durable when a change returns too)",
    () =>
      Effect.gen(function* () {
        const said: Array<string> = []
        const recording = Layer.succeed(TurnEngine.ContextCompiler, {
          compile: (o) =>
            Effect.zipRight(
              Effect.sync(() => void said.push("compile")),
              compile(o)
            )
        })
        const engine = yield* TurnEngine.make.pipe(Effect.provide(recording))
        // A session's first input: the required layers' compile checks it before it is written;
        // then the number (nothing to wait for), the first step's compile, the model.
        yield* notedTurn(engine, "s7", said)
        expect(said).toEqual(["compile", "turn", "compile", "model", "done"])
        // Then one compile (the first step's, which checks the input), the number, the model.
        said.length = 0
        yield* notedTurn(engine, "s7", said)
        expect(said).toEqual(["compile", "turn", "model", "done"])
      }).pipe(Effect.provide(services))
  )
})

/** The engine's services over a file store on `root`. */
const fileServicesOn = (root: string) =>
  Layer.mergeAll(
    Workspace.layerStore,
    Summarizer.layerDeterministic,
    ModelRegistry.layer(),
    Tokenizer.layer(),
    TurnEngine.seamsLive
  ).pipe(Layer.provideMerge(HistoryStore.layerStore), Layer.provideMerge(Store.layer(root)))

/**
 * 8,140 characters of Chinese (no more than gpt-4's window in tokens): compaction's estimate says
 * 2,714 tokens, under its trigger (80% of 8,192), so the required layers' compile is not made; the
 * text takes more tokens than the window.
 */
const overGpt4Window = () => {
  let text = ""
  for (let i = 0; i < 7_400; i++)
    text += String.fromCharCode(0x4e00 + ((i * 7919) % 20_000)) + (i % 10 === 9 ? " " : "")
  return text
}

describe("TurnEngine on the file store", () => {
  const roots: Array<string> = []
  afterAll(() => {
    for (const root of roots) rmSync(root, { recursive: true, force: true })
  })

  /**
   * The disk's fdatasync as the test says: `decide` is asked at each call whether to pass it on,
   * hold it (until `releaseAll`) or fail it with EIO. `restore` releases what is held and puts
   * the disk back (run it in `finally`, so a failed expectation leaves no turn blocked on a sync).
   */
  const disk = async (root: string, decide: () => "pass" | "hold" | "fail") => {
    const probe = await open(join(root, "system-prompt.md"), "r")
    const prototype = Object.getPrototypeOf(probe) as { datasync: () => Promise<void> }
    await probe.close()
    const datasync = prototype.datasync
    const held: Array<() => void> = []
    vi.spyOn(prototype, "datasync").mockImplementation(function (this: unknown) {
      const choice = decide()
      if (choice === "pass") return datasync.call(this)
      if (choice === "fail")
        return Promise.reject(Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" }))
      return new Promise<void>((resolve, reject) => {
        held.push(() => datasync.call(this).then(resolve, reject))
      })
    })
    const releaseAll = () => {
      for (const release of held.splice(0)) release()
    }
    return {
      held,
      releaseAll,
      restore: () => {
        releaseAll()
        vi.restoreAllMocks()
      }
    }
  }
  /** Waits until `ready` holds; fails, naming `what`, when it has not after 10 s. */
  const until = async (what: string, ready: () => boolean) => {
    for (let i = 0; i < 2_000 && !ready(); i++) await new Promise((r) => setTimeout(r, 5))
    if (!ready()) throw new Error(`${what}: not after 10 s`)
  }
  /** Releases held syncs until `turn` settles; its outcome. */
  const releasedUntilDone = async <A>(turn: Promise<A>, releaseAll: () => void) => {
    let done = false
    const settled = turn.finally(() => {
      done = true
    })
    while (!done) {
      releaseAll()
      await new Promise((r) => setTimeout(r, 5))
    }
    return settled
  }
  const fileRoot = (prefix: string) => {
    const root = mkdtempSync(join(tmpdir(), prefix))
    roots.push(root)
    writeFileSync(join(root, "system-prompt.md"), "You are a careful assistant.")
    return root
  }
  /** The entries in a session's memory.json as on disk (none when there is no file). */
  const memoryFileOf = (root: string, sessionId: string): Array<unknown> => {
    const file = join(root, sessionId, "memory.json")
    return existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as Array<unknown>) : []
  }
  const important = {
    input: "We decided to ship v2.3 on 2026-12-01 after the freeze.",
    answer: "Release 2.3 is set for 2026-12-01."
  }

  it("compiles while the input's fdatasync runs, and says nothing (its number, a model call) before it is done", async () => {
    const root = fileRoot("ctxo-engine-sync-")
    const runtime = ManagedRuntime.make(fileServicesOn(root))
    const synced = await disk(root, () => "hold")
    try {
      await runtime.runPromise(
        Effect.flatMap(Store.Store, (store) => store.createSession({ id: "s", concept: "" }))
      )
      const said: Array<string> = []
      const engine = await runtime.runPromise(TurnEngine.make)
      const turn = runtime.runPromise(notedTurn(engine, "s", said))
      await until("the input's fdatasync held", () => synced.held.length > 0)
      // The input is written and the first request compiled; its sync is held: nothing said yet.
      await new Promise((r) => setTimeout(r, 50))
      expect(synced.held).toHaveLength(1)
      expect(said).toEqual([])
      await releasedUntilDone(turn, synced.releaseAll)
      expect(said).toEqual(["turn", "model", "done"])
    } finally {
      synced.restore()
      await runtime.dispose()
    }
  })

  it("checks memory's promotion while the answer's fdatasync runs, and writes a due turn's entry and says done only once it is on disk", async () => {
    const root = fileRoot("ctxo-engine-promote-")
    const said: Array<string> = []
    // Memory as the engine's, over a store whose reads and writes of memory.json once the model
    // has answered are noted (before it, the compile reads memory as a source).
    const note = Effect.sync(() => void (said.includes("model") && said.push("memory")))
    const noted = Layer.effect(
      Memory.Memory,
      Effect.flatMap(Store.Store, (store) =>
        Memory.make().pipe(
          Effect.provideService(Store.Store, {
            ...store,
            readMemory: (sessionId) => Effect.zipRight(note, store.readMemory(sessionId)),
            updateMemory: (sessionId, update) => Effect.zipRight(note, store.updateMemory(sessionId, update))
          })
        )
      )
    )
    const runtime = ManagedRuntime.make(Layer.provideMerge(noted, fileServicesOn(root)))
    const entries = () => memoryFileOf(root, "p")
    // The syncs are held once the model has answered: the answer's.
    const synced = await disk(root, () => (said.includes("model") ? "hold" : "pass"))
    try {
      await runtime.runPromise(
        Effect.flatMap(Store.Store, (store) => store.createSession({ id: "p", concept: "" }))
      )
      const engine = await runtime.runPromise(TurnEngine.make)
      const turnOf = (input: string, answer: string) =>
        runtime.runPromise(
          engine.turn(
            { sessionId: "p", input },
            {
              model: () =>
                Effect.sync(() => {
                  said.push("model")
                  return { text: answer, toolCalls: [] }
                })
            },
            { ...options, emit: (event) => Effect.sync(() => void said.push(event.type)) }
          )
        )
      // A turn due for L2: checked while its answer's sync is held, nothing written yet.
      const first = turnOf(important.input, important.answer)
      await until("memory checked after the model's answer", () => said.includes("memory"))
      await new Promise((r) => setTimeout(r, 50))
      expect(synced.held).toHaveLength(1)
      expect(said).toEqual(["turn", "model", "memory"])
      expect(entries()).toEqual([])
      expect((await releasedUntilDone(first, synced.releaseAll))._tag).toBe("Answered")
      // Written (memory.json read again) once the answer is on disk, then done.
      expect(said).toEqual(["turn", "model", "memory", "memory", "done"])
      expect(entries()).toMatchObject([{ id: "L2:p:t1", level: "L2", sources: [{ session: "p", turn: 1 }] }])
      // A turn not due: checked while its answer's sync is held, nothing more, done once synced.
      said.length = 0
      const second = turnOf("thanks", "You are welcome.")
      await until("memory checked after the model's answer", () => said.includes("memory"))
      await new Promise((r) => setTimeout(r, 50))
      expect(said).toEqual(["turn", "model", "memory"])
      await releasedUntilDone(second, synced.releaseAll)
      expect(said).toEqual(["turn", "model", "memory", "done"])
      expect(entries()).toHaveLength(1)
    } finally {
      synced.restore()
      await runtime.dispose()
    }
  })

  it("writes no memory entry of a turn whose answer's fdatasync fails, and fails the turn naming the history file", async () => {
    const root = fileRoot("ctxo-engine-promote-fail-")
    const runtime = ManagedRuntime.make(Layer.provideMerge(Memory.layer(), fileServicesOn(root)))
    let answered = false
    const synced = await disk(root, () => (answered ? "fail" : "pass"))
    try {
      await runtime.runPromise(
        Effect.flatMap(Store.Store, (store) => store.createSession({ id: "f", concept: "" }))
      )
      const engine = await runtime.runPromise(TurnEngine.make)
      const error = await runtime.runPromise(
        Effect.flip(
          engine.turn(
            { sessionId: "f", input: important.input },
            {
              model: () =>
                Effect.sync(() => {
                  answered = true
                  return { text: important.answer, toolCalls: [] }
                })
            },
            options
          )
        )
      )
      expect(error._tag).toBe("HistoryIOError")
      expect(error.message).toContain("f/messages.json")
      expect(memoryFileOf(root, "f")).toEqual([])
    } finally {
      synced.restore()
      await runtime.dispose()
    }
  })

  it("takes an input its first compile refuses back out of the journal: another store on the root reads the history as it was", async () => {
    const root = mkdtempSync(join(tmpdir(), "ctxo-engine-undo-"))
    roots.push(root)
    const model = "openai/gpt-4"
    const text = overGpt4Window()
    const first = ManagedRuntime.make(fileServicesOn(root))
    const before = await first.runPromise(
      Effect.gen(function* () {
        yield* Effect.flatMap(Store.Store, (store) => store.createSession({ id: "u", concept: "" }))
        const engine = yield* TurnEngine.make
        yield* engine.turn({ sessionId: "u", input: "hello", model }, answer("hi"), options)
        const history = yield* HistoryStore.HistoryStore
        const before = yield* history.load("u")
        const error = yield* Effect.flip(
          engine.turn({ sessionId: "u", input: text, model }, answer("never"), options)
        )
        expect(error._tag).toBe("BudgetExceeded")
        return before
      })
    )
    await first.dispose()
    // Read afresh from the files (messages.json and its journal), by a store of its own.
    const second = ManagedRuntime.make(fileServicesOn(root))
    try {
      const [after, next] = await second.runPromise(
        Effect.gen(function* () {
          const history = yield* HistoryStore.HistoryStore
          const after = yield* history.load("u")
          const engine = yield* TurnEngine.make
          const next = yield* engine.turn(
            { sessionId: "u", input: "and now?", model },
            answer("fine"),
            options
          )
          return [after, next] as const
        })
      )
      expect(after).toEqual(before)
      expect(next.turn).toBe(2)
    } finally {
      await second.dispose()
    }
  })
})
