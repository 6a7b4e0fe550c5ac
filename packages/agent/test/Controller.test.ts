import * as HistoryStore from "@ctxo/history/HistoryStore"
import * as MemoryStore from "@ctxo/store/MemoryStore"
import * as Store from "@ctxo/store/Store"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Queue } from "effect"
import * as Controller from "../src/Controller.ts"
import * as SessionEvents from "../src/SessionEvents.ts"
import * as TurnEngine from "../src/TurnEngine.ts"
import { baseOver } from "./services.ts"

/** A fresh data root in memory (sessions a, b, c, d with metadata and concepts) and every service over it. */
const servicesOf = (wrap: (store: Store.Service) => Store.Service = (store) => store) => {
  const memory = MemoryStore.makeMemory({ global: { "system-prompt.md": "You help." } })
  const store = wrap(memory)
  const base = baseOver(store)
  const seeded = Layer.effectDiscard(
    Effect.all([
      store.createSession({ id: "a", concept: "Quantum notes", metadata: { team: "physics" } }),
      store.createSession({ id: "b", concept: "Fix the login bug", metadata: { team: "web", lang: "ts" } }),
      store.createSession({ id: "c", concept: "Quantum homework", metadata: { team: "physics" } }),
      store.createSession({ id: "d", concept: "Old project" })
    ])
  )
  return Layer.mergeAll(TurnEngine.layer, Controller.layer).pipe(
    Layer.provideMerge(base),
    Layer.provideMerge(Layer.merge(Layer.succeed(Store.Store, store), seeded))
  )
}

/** A store that gives way to other fibers after reading the distributions, as a disk read may. */
const yielding = (store: Store.Service): Store.Service => ({
  ...store,
  listDistributions: Effect.zipLeft(store.listDistributions, Effect.yieldNow())
})

const answer = (text: string): TurnEngine.Driver => ({
  model: () => Effect.succeed({ text, toolCalls: [] })
})
const options: TurnEngine.TurnOptions = { defaultModel: "openai/gpt-4o", maxSteps: 4 }

describe("Controller: lifecycle", () => {
  it.effect("pauses, resumes and ends; the same state again changes nothing; ended is final", () =>
    Effect.gen(function* () {
      const controller = yield* Controller.Controller
      const paused = yield* controller.pause("a")
      expect(paused).toMatchObject({ changed: true, session: { id: "a", state: "paused" } })
      const again = yield* controller.pause("a")
      expect(again).toEqual({ changed: false, session: paused.session })
      expect((yield* controller.resume("a")).session.state).toBe("active")
      expect((yield* controller.resume("a")).changed).toBe(false)
      expect((yield* controller.end("a")).session.state).toBe("ended")
      expect((yield* controller.end("a")).changed).toBe(false)
      for (const action of ["pause", "resume"] as const) {
        const refused = yield* Effect.flip(controller[action]("a"))
        expect(refused).toMatchObject({ _tag: "IllegalTransition", sessionId: "a", state: "ended", action })
        expect(refused.message).toBe(
          `Session a is ended, so it cannot ${action} (ended -> ${action === "pause" ? "paused" : "active"}): an ended session is final`
        )
      }
      expect((yield* Effect.flip(controller.pause("nope")))._tag).toBe("SessionNotFound")
    }).pipe(Effect.provide(servicesOf()))
  )

  it.effect("publishes each change once to a subscriber, the end included", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const events = yield* SessionEvents.SessionEvents
        const store = yield* Store.Store
        const controller = yield* Controller.Controller
        const subscription = yield* events.subscribe
        // A subscriber as the memory persister will be: it waits for events and reads the store.
        const seen: Array<string> = []
        const subscriber = yield* Queue.take(subscription).pipe(
          Effect.tap((e) =>
            e._tag === "SessionStateChanged"
              ? Effect.map(
                  store.getSession(e.sessionId),
                  (r) => void seen.push(`${e.from}->${e.to}:${r.state}`)
                )
              : Effect.void
          ),
          Effect.repeatN(2),
          Effect.fork
        )
        yield* controller.pause("b")
        yield* controller.pause("b")
        yield* controller.resume("b")
        const ended = yield* controller.end("b")
        yield* Fiber.join(subscriber)
        expect(seen).toEqual(["active->paused:ended", "paused->active:ended", "active->ended:ended"])
        expect(yield* Queue.size(subscription)).toBe(0)
        const scope = yield* store.scope
        // The subscriber above consumed them; a second one, subscribed before, gets the same end.
        const second = yield* events.subscribe
        yield* controller.pause("c")
        yield* controller.end("c")
        const taken = yield* Queue.takeAll(second)
        expect([...taken].at(-1)).toEqual({
          _tag: "SessionStateChanged",
          scope,
          sessionId: "c",
          from: "paused",
          to: "ended",
          at: (yield* store.getSession("c")).stateChangedAt
        })
        expect(ended.session.stateChangedAt).toBe((yield* store.getSession("b")).stateChangedAt)
      })
    ).pipe(Effect.provide(servicesOf()))
  )

  it.effect("changes metadata by merging (null removes a key) and refuses keys over the limits", () =>
    Effect.gen(function* () {
      const controller = yield* Controller.Controller
      const updated = yield* controller.update("b", {
        metadata: { lang: null, owner: "ada" },
        concept: "Auth"
      })
      expect(updated).toMatchObject({ concept: "Auth", metadata: { team: "web", owner: "ada" } })
      expect(updated.metadata).not.toHaveProperty("lang")
      const bad = yield* Effect.flip(controller.update("b", { metadata: { "no spaces": "x" } }))
      expect(bad).toMatchObject({ _tag: "InvalidControllerInput", field: "metadata" })
      const many = Object.fromEntries(Array.from({ length: 70 }, (_, i) => [`k${i}`, "v"]))
      expect((yield* Effect.flip(controller.update("b", { metadata: many })))._tag).toBe(
        "InvalidControllerInput"
      )
      expect((yield* Store.Store.pipe(Effect.flatMap((s) => s.getSession("b")))).metadata).toEqual({
        team: "web",
        owner: "ada"
      })
    }).pipe(Effect.provide(servicesOf()))
  )
})

describe("Controller and the turn engine", () => {
  it.effect("refuses turns of paused and ended sessions, records nothing, and runs again once resumed", () =>
    Effect.gen(function* () {
      const controller = yield* Controller.Controller
      const engine = yield* TurnEngine.TurnEngine
      const history = yield* HistoryStore.HistoryStore
      yield* controller.pause("a")
      const refused = yield* Effect.flip(
        engine.turn({ sessionId: "a", input: "hello" }, answer("hi"), options)
      )
      expect(refused).toMatchObject({ _tag: "SessionNotActive", sessionId: "a", state: "paused" })
      expect(refused.message).toBe("Session a is paused, so it cannot take a turn until it is resumed")
      expect((yield* history.load("a")).messages).toEqual([])
      // Tool results of a turn are refused too; a preview reads and stays allowed, a dry run does not.
      const results = engine.continueTurn({ sessionId: "a", results: [] }, answer("x"), options)
      expect((yield* Effect.flip(results))._tag).toBe("SessionNotActive")
      yield* engine.preview({ sessionId: "a", defaultModel: "openai/gpt-4o", input: "peek" })
      const dry = engine.preview({ sessionId: "a", defaultModel: "openai/gpt-4o", input: "x", dryRun: true })
      expect((yield* Effect.flip(dry))._tag).toBe("SessionNotActive")
      yield* controller.resume("a")
      const ran = yield* engine.turn({ sessionId: "a", input: "hello" }, answer("hi"), options)
      expect(ran).toMatchObject({ _tag: "Answered", text: "hi" })
      yield* controller.end("a")
      const ended = yield* Effect.flip(engine.turn({ sessionId: "a", input: "again" }, answer("no"), options))
      expect(ended).toMatchObject({ _tag: "SessionNotActive", state: "ended" })
      expect(ended.message).toMatch(
        /^Session a is ended, so it cannot take a turn: an ended session is final$/
      )
    }).pipe(Effect.provide(servicesOf()))
  )

  it.live(
    "a pause racing a turn: the running turn finishes, the pause waits for it, the next turn is refused",
    () =>
      Effect.gen(function* () {
        const controller = yield* Controller.Controller
        const engine = yield* TurnEngine.TurnEngine
        const inModel = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const slow: TurnEngine.Driver = {
          model: () =>
            Effect.gen(function* () {
              yield* Deferred.succeed(inModel, undefined)
              yield* Deferred.await(release)
              return { text: "finished", toolCalls: [] }
            })
        }
        const turn = yield* Effect.fork(engine.turn({ sessionId: "b", input: "long job" }, slow, options))
        yield* Deferred.await(inModel)
        const pause = yield* Effect.fork(controller.pause("b"))
        yield* Effect.sleep("20 millis")
        // The pause holds no answer while the turn runs; the session still says active.
        expect(pause.unsafePoll()).toBeNull()
        expect((yield* Store.Store.pipe(Effect.flatMap((s) => s.getSession("b")))).state).toBe("active")
        yield* Deferred.succeed(release, undefined)
        expect(yield* Fiber.join(turn)).toMatchObject({ _tag: "Answered", text: "finished" })
        expect((yield* Fiber.join(pause)).session.state).toBe("paused")
        const next = yield* Effect.flip(engine.turn({ sessionId: "b", input: "next" }, answer("no"), options))
        expect(next._tag).toBe("SessionNotActive")
      }).pipe(Effect.provide(servicesOf()))
  )
})

describe("Controller: tasks", () => {
  it.effect(
    "adds, lists and updates tasks; paused sessions take them, ended ones neither take nor change them",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const controller = yield* Controller.Controller
          const events = yield* SessionEvents.SessionEvents
          const subscription = yield* events.subscribe
          const task = yield* controller.addTask("a", { title: "Read the paper", description: "Section 2" })
          expect(task).toMatchObject({ title: "Read the paper", description: "Section 2", status: "pending" })
          expect(task.createdAt).toBe(task.updatedAt)
          yield* controller.pause("a")
          const second = yield* controller.addTask("a", { title: "Write a summary" })
          expect((yield* controller.tasks("a")).map((t) => t.id)).toEqual([task.id, second.id])
          const done = yield* controller.updateTask("a", task.id, { status: "done", description: null })
          expect(done).toMatchObject({ id: task.id, title: "Read the paper", status: "done" })
          expect(done).not.toHaveProperty("description")
          expect(yield* controller.updateTask("a", task.id, { status: "done" })).toEqual(done)
          const renamed = yield* controller.updateTask("a", second.id, { title: "Write the summary" })
          expect(renamed).toMatchObject({ title: "Write the summary", status: "pending" })
          const unknown = yield* Effect.flip(controller.updateTask("a", "t-nope", { status: "done" }))
          expect(unknown).toMatchObject({ _tag: "TaskNotFound", taskId: "t-nope" })
          expect(unknown.message).toBe("Session a has no task t-nope")
          expect((yield* Effect.flip(controller.addTask("a", { title: "  " })))._tag).toBe(
            "InvalidControllerInput"
          )
          yield* controller.end("a")
          const refused = yield* Effect.flip(controller.addTask("a", { title: "Too late" }))
          expect(refused).toMatchObject({ _tag: "SessionNotActive", state: "ended" })
          expect(refused.message).toBe(
            "Session a is ended, so it cannot take a new task: an ended session is final"
          )
          expect((yield* Effect.flip(controller.updateTask("a", task.id, { status: "pending" })))._tag).toBe(
            "SessionNotActive"
          )
          expect((yield* controller.tasks("a")).map((t) => t.status)).toEqual(["done", "pending"])
          const tags = [...(yield* Queue.takeAll(subscription))].map((e) => e._tag)
          expect(tags).toEqual([
            "TaskAdded",
            "SessionStateChanged",
            "TaskAdded",
            "TaskUpdated",
            "TaskUpdated",
            "SessionStateChanged"
          ])
        })
      ).pipe(Effect.provide(servicesOf()))
  )
})

describe("Controller: distribution", () => {
  it.effect(
    "broadcasts to every session that is not ended, reporting the ended ones, paused ones included",
    () =>
      Effect.gen(function* () {
        const controller = yield* Controller.Controller
        yield* controller.pause("b")
        yield* controller.end("d")
        const out = yield* controller.distribute({
          task: { title: "Review the plan" },
          mode: "broadcast",
          fromSession: "c"
        })
        expect(out.replayed).toBe(false)
        expect(
          out.results.map((r) => ("taskId" in r ? `${r.session}:task` : `${r.session}:${r.skipped}`))
        ).toEqual(["a:task", "b:task", "d:ended"])
        for (const r of out.results)
          if ("taskId" in r) {
            const tasks = yield* controller.tasks(r.session)
            expect(tasks).toEqual([
              expect.objectContaining({
                id: r.taskId,
                title: "Review the plan",
                origin: { distributionId: out.distributionId, fromSession: "c" }
              })
            ])
          }
        expect(yield* controller.tasks("c")).toEqual([])
        expect(yield* controller.tasks("d")).toEqual([])
      }).pipe(Effect.provide(servicesOf()))
  )

  it.effect(
    "filters on metadata and concept, over the listed sessions or all, and reports what it skipped",
    () =>
      Effect.gen(function* () {
        const controller = yield* Controller.Controller
        const physics = yield* controller.distribute({
          task: { title: "Check units" },
          mode: "filtered",
          filter: { metadata: { team: "physics" } }
        })
        expect(physics.results.map((r) => r.session)).toEqual(["a", "c"])
        const listed = yield* controller.distribute({
          task: { title: "Homework only" },
          mode: "filtered",
          sessions: ["c", "a", "b", "ghost", "c"],
          filter: { concept: "HOMEWORK", metadata: { team: "physics" } }
        })
        expect(listed.results).toEqual([
          { session: "c", taskId: expect.stringMatching(/^t-/) },
          { session: "a", skipped: "not_matched", message: "Session a does not match the filter" },
          { session: "b", skipped: "not_matched", message: "Session b does not match the filter" },
          { session: "ghost", skipped: "not_found", message: "No session ghost" }
        ])
        const missing = yield* Effect.flip(controller.distribute({ task: { title: "x" }, mode: "filtered" }))
        expect(missing).toMatchObject({ _tag: "InvalidControllerInput", field: "filter" })
        const misplaced = controller.distribute({
          task: { title: "x" },
          mode: "broadcast",
          filter: { concept: "q" }
        })
        expect((yield* Effect.flip(misplaced))._tag).toBe("InvalidControllerInput")
        const from = controller.distribute({ task: { title: "x" }, mode: "broadcast", fromSession: "nope" })
        expect((yield* Effect.flip(from))._tag).toBe("SessionNotFound")
      }).pipe(Effect.provide(servicesOf()))
  )

  it.effect(
    "answers a retry with the same key as the first time, adds nothing twice, refuses the key for another request",
    () =>
      Effect.gen(function* () {
        const controller = yield* Controller.Controller
        const request: Controller.DistributeRequest = {
          task: { title: "Once" },
          mode: "broadcast",
          sessions: ["a", "b"]
        }
        const first = yield* controller.distribute(request, { idempotencyKey: "k-1" })
        const retry = yield* controller.distribute(request, { idempotencyKey: "k-1" })
        expect(retry).toEqual({ ...first, replayed: true })
        expect((yield* controller.tasks("a")).length).toBe(1)
        const other = yield* Effect.flip(
          controller.distribute({ ...request, task: { title: "Another" } }, { idempotencyKey: "k-1" })
        )
        expect(other).toMatchObject({
          _tag: "DistributionConflict",
          key: "k-1",
          distributionId: first.distributionId
        })
        // Concurrent requests with one key: one distribution.
        const many = yield* Effect.all(
          Array.from({ length: 5 }, () =>
            controller.distribute({ ...request, task: { title: "Race" } }, { idempotencyKey: "k-2" })
          ),
          { concurrency: "unbounded" }
        )
        expect(new Set(many.map((m) => m.distributionId)).size).toBe(1)
        expect((yield* controller.tasks("b")).filter((t) => t.title === "Race")).toHaveLength(1)
        // Without a key, each request is a distribution of its own.
        yield* controller.distribute(request)
        expect((yield* controller.tasks("a")).filter((t) => t.title === "Once")).toHaveLength(2)
      }).pipe(Effect.provide(servicesOf(yielding)))
  )

  it.effect("finishes a distribution a crash cut short, with the planned task ids, adding none twice", () =>
    Effect.gen(function* () {
      const controller = yield* Controller.Controller
      const store = yield* Store.Store
      const request = { task: { title: "Resume me" }, mode: "broadcast" as const, sessions: ["a", "b"] }
      // What a crash after the first session leaves: the plan written, one task added.
      yield* store.putDistribution({
        id: "d-crashed",
        createdAt: "2026-01-01T00:00:00.000Z",
        idempotencyKey: "k-crash",
        request,
        results: [
          { session: "a", taskId: "t-a" },
          { session: "b", taskId: "t-b" }
        ],
        complete: false
      })
      yield* store.writeTasks("a", [
        {
          id: "t-a",
          title: "Resume me",
          status: "pending",
          createdAt: "2026-01-01T00:00:00.000Z",
          updatedAt: "2026-01-01T00:00:00.000Z",
          origin: { distributionId: "d-crashed" }
        }
      ])
      const retried = yield* controller.distribute(request, { idempotencyKey: "k-crash" })
      expect(retried).toMatchObject({ distributionId: "d-crashed", replayed: true })
      expect((yield* controller.tasks("a")).map((t) => t.id)).toEqual(["t-a"])
      expect((yield* controller.tasks("b")).map((t) => t.id)).toEqual(["t-b"])
      expect((yield* store.listDistributions).find((d) => d.id === "d-crashed")?.complete).toBe(true)
    }).pipe(Effect.provide(servicesOf()))
  )
})
