/**
 * What the file store keeps in memory of the sessions it served, once the session cache let them go:
 * a gateway that serves many sessions a few turns each must not keep much for each of them (a name
 * and a number, until its journal is folded), nor anything past its bound of sessions with a
 * journal (1,024 by default), whose folds run one at a time.
 * A file of its own: the heap is measured in a process that holds nothing of other tests.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { open } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { getHeapSpaceStatistics, setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { diffHistory } from "../src/HistoryJournal.ts"
import * as SessionCache from "../src/SessionCache.ts"
import * as Store from "../src/Store.ts"

const root = mkdtempSync(join(tmpdir(), "ctxo-store-memory-"))
// What is measured is memory, not the disk: a file handle's fdatasync and fsync return at once here
// (a thousand of them, behind other tests' writes, took a minute; durability has its own tests).
// Replaced, not spied on: a spy keeps every call's file handle.
type Syncs = Record<"datasync" | "sync", () => Promise<void>>
let restore = () => {}
beforeAll(async () => {
  writeFileSync(join(root, "probe"), "")
  const probe = await open(join(root, "probe"), "r")
  const prototype = Object.getPrototypeOf(probe) as Syncs
  await probe.close()
  const { datasync, sync } = prototype
  prototype.datasync = prototype.sync = async () => {}
  restore = () => Object.assign(prototype, { datasync, sync })
})
afterAll(() => {
  restore()
  rmSync(root, { recursive: true, force: true })
})

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)

interface Doc {
  readonly format: string
  readonly messages: ReadonlyArray<{ readonly id: string; readonly text: string }>
}
/** One message more in the session's history, as history writes it: the difference. */
const add = (store: Store.Service, id: string, text: string) =>
  store.updateHistory(id, (json) => {
    const before = (json as Doc | undefined) ?? { format: "ctxo.history/v1", messages: [] }
    const after = { ...before, messages: [...before.messages, { id: text, text }] }
    return Effect.succeed([after, diffHistory(before, after)] as const)
  })

/** A full collection on demand (the test runner has no --expose-gc). */
setFlagsFromString("--expose-gc")
const gc = runInNewContext("gc") as () => void
/** The heap in use after a full collection, without the code space (what V8 compiles meanwhile). */
const heap = async () => {
  await new Promise((r) => setTimeout(r, 50))
  gc()
  return getHeapSpaceStatistics()
    .filter((space) => space.space_name !== "code_space")
    .reduce((n, space) => n + space.space_used_size, 0)
}

/** A store on a root of its own whose cache keeps one session: what stays is the store's own. */
const served = (journal: NonNullable<Store.StoreOptions["journal"]> = {}) => {
  const dir = mkdtempSync(join(root, "store-"))
  const store = Store.makeUnsafe(dir, { cache: SessionCache.make({ maxBytes: 1 }), journal })
  let count = 0
  return {
    store,
    /** One record in each of `sessions` new sessions, each in a lock span, as a turn's. */
    serve: async (sessions: number) => {
      for (let end = count + sessions; count < end; count++) {
        const id = `s-${count}`
        mkdirSync(join(dir, id))
        await run(store.withSessionLock(id, add(store, id, `hello ${id}`)))
      }
    },
    /** How many of the sessions served have a journal. */
    journals: () => {
      let n = 0
      for (let i = 0; i < count; i++) if (existsSync(join(dir, `s-${i}`, "messages.journal"))) n++
      return n
    }
  }
}

describe("the file store's memory", () => {
  it("keeps next to nothing of each session once the session cache let it go", async () => {
    // A bound past the sessions served here: no fold runs, what is measured is what each keeps.
    const { store, serve } = served({ maxJournaled: 4_096 })
    await serve(400)
    /** Heap bytes a session of the next 600 kept. */
    const batch = async () => {
      const before = await heap()
      await serve(600)
      return ((await heap()) - before) / 600
    }
    // The smaller of two batches: what V8 makes of the code it compiles meanwhile (outside the code
    // space) comes in steps, in one batch or the other; what each session keeps is in both.
    const perSession = Math.min(await batch(), await batch())
    // 110 to 220 bytes here (a name and two numbers until its journal is folded, and steps of
    // compiled code); 930 when each session's last lock span (the set of locks its fiber held) and
    // its journal's file were kept until its journal was folded.
    expect(perSession).toBeLessThan(600)
    expect(await run(store.readHistoryJson("s-0"))).toMatchObject({ messages: [{ text: "hello s-0" }] })
    await run(store.flush)
  }, 60_000)

  it("folds the sessions past its bound one at a time, in one worker, losing nothing", async () => {
    const { store, serve, journals } = served({ maxJournaled: 16, foldDelayMs: 10 })
    await serve(50)
    const before = await heap()
    await serve(250)
    const perSession = ((await heap()) - before) / 250
    // A few hundred bytes; with a fiber per session past the bound, each queued for the store's fold
    // lock (whose release wakes every waiter), tens of kilobytes.
    expect(perSession).toBeLessThan(2_000)
    for (let waited = 0; journals() > 16; waited += 50) {
      expect(waited, "the folds past the bound did not end within 30 s").toBeLessThan(30_000)
      await new Promise((r) => setTimeout(r, 50))
    }
    for (const i of [0, 100, 299])
      expect(await run(store.readHistoryJson(`s-${i}`))).toMatchObject({
        messages: [{ text: `hello s-${i}` }]
      })
    await run(store.flush)
  }, 60_000)
})
