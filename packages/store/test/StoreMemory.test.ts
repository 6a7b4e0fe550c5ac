/**
 * What the file store keeps in memory of the sessions it served, once the session cache let them go:
 * a gateway that serves many sessions a few turns each must not keep an entry for each of them.
 * A file of its own: the heap is measured in a process that holds nothing of other tests.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { getHeapSpaceStatistics, setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { diffHistory } from "../src/HistoryJournal.ts"
import * as SessionCache from "../src/SessionCache.ts"
import * as Store from "../src/Store.ts"

const root = mkdtempSync(join(tmpdir(), "ctxo-store-memory-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))

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

describe("the file store's memory", () => {
  it("keeps next to nothing of each session once the session cache let it go", async () => {
    // A full collection on demand (the test runner has no --expose-gc).
    setFlagsFromString("--expose-gc")
    const gc = runInNewContext("gc") as () => void
    // The heap without the code space: what V8 compiles meanwhile is not the store's.
    const heap = async () => {
      await new Promise((r) => setTimeout(r, 50))
      gc()
      return getHeapSpaceStatistics()
        .filter((space) => space.space_name !== "code_space")
        .reduce((n, space) => n + space.space_used_size, 0)
    }
    // A cache that keeps one session: what stays is the store's own bookkeeping.
    const store = Store.makeUnsafe(root, { cache: SessionCache.make({ maxBytes: 1 }) })
    let served = 0
    const serve = async (sessions: number) => {
      for (let end = served + sessions; served < end; served++) {
        const id = `s-${served}`
        mkdirSync(join(root, id))
        await run(store.withSessionLock(id, add(store, id, `hello ${id}`)))
      }
    }
    await serve(400)
    const before = await heap()
    await serve(600)
    const perSession = ((await heap()) - before) / 600
    // 90 to 360 bytes here, most of it what V8 made of the code it compiled meanwhile (outside the
    // code space); 720 to 990 when each session's last lock span (the set of locks its fiber held)
    // and its journal's file were kept until its journal was folded.
    expect(perSession).toBeLessThan(600)
    expect(await run(store.readHistoryJson("s-0"))).toMatchObject({ messages: [{ text: "hello s-0" }] })
    await run(store.flush)
  }, 60_000)
})
