/**
 * The memory levels over HTTP: a session's L1 and L2 (promotion at the end of a turn), pin and
 * delete, L3 and L4 of the data root written through the event bus when a session ends, the
 * persist request, 404s naming the entry, and tenants kept apart.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, chatEvents, createSession, startGateway } from "./harness.ts"

type Gateway = Awaited<ReturnType<typeof startGateway>>

let gw: Gateway
beforeAll(async () => {
  gw = await startGateway()
})
afterAll(() => gw.close())

const chat = async (g: Gateway, sid: string, message: string) => {
  const r = await g.run(chatEvents(sid, { message }))
  expect(r.events.at(-1)?.event).toBe("done")
}

const ids = (json: { entries: ReadonlyArray<{ id: string }> }) => json.entries.map((e) => e.id)

describe("a session's memory", () => {
  it("promotes an important turn to L2 when it ends; L1 shows the newest turns; pin and delete", async () => {
    const sid = "memory-levels"
    await createSession(gw, sid)
    await chat(gw, sid, "hello")
    await chat(gw, sid, "Please remember: we decided to deploy on 2026-12-01 with Kestrel.")
    await chat(gw, sid, "thanks")

    const l1 = await call(gw, "GET", `/api/sessions/${sid}/memory?level=L1`)
    expect(l1.status).toBe(200)
    expect(ids(l1.json)).toEqual([`L1:${sid}:t1`, `L1:${sid}:t2`, `L1:${sid}:t3`])
    const l2 = await call(gw, "GET", `/api/sessions/${sid}/memory?level=L2`)
    expect(ids(l2.json)).toEqual([`L2:${sid}:t2`])
    expect(l2.json.entries[0]).toMatchObject({
      level: "L2",
      expired: false,
      sources: [{ session: sid, turn: 2 }]
    })
    expect(l2.json.entries[0].importance).toBeGreaterThan(0.6)

    // Pinning an L1 turn promotes it to L2, pinned.
    const pinned = await call(gw, "POST", `/api/sessions/${sid}/memory/L1:${sid}:t3/pin`, {})
    expect(pinned.status).toBe(200)
    expect(pinned.json).toMatchObject({ id: `L1:${sid}:t3`, pinned: true })
    const after = await call(gw, "GET", `/api/sessions/${sid}/memory?level=L2`)
    expect(ids(after.json)).toEqual([`L2:${sid}:t2`, `L2:${sid}:t3`])

    // Deleting hides the entry; it is still listed with deleted=true.
    expect((await call(gw, "DELETE", `/api/sessions/${sid}/memory/L2:${sid}:t3`)).status).toBe(204)
    expect(ids((await call(gw, "GET", `/api/sessions/${sid}/memory?level=L2`)).json)).toEqual([
      `L2:${sid}:t2`
    ])
    const all = await call(gw, "GET", `/api/sessions/${sid}/memory?level=L2&deleted=true`)
    expect(all.json.entries.find((e: { id: string }) => e.id === `L2:${sid}:t3`).deletedAt).toBeTypeOf(
      "string"
    )

    const missing = await call(gw, "POST", `/api/sessions/${sid}/memory/L2:${sid}:t99/pin`, {})
    expect(missing.status).toBe(404)
    expect(missing.json.error.message).toBe(`session ${sid} has no L2 memory entry L2:${sid}:t99`)
    const wrongLevel = await call(gw, "GET", `/api/sessions/${sid}/memory?level=L3`)
    expect(wrongLevel.status).toBe(400)
    expect((await call(gw, "GET", "/api/sessions/nope/memory?level=L1")).status).toBe(404)
  })
})

describe("L3 and L4", () => {
  it("writes L4 through the event bus when a session ends, and lists it", async () => {
    const sid = "memory-ends"
    await createSession(gw, sid)
    await chat(gw, sid, "Remember that my on-call rotation starts 2026-12-07 with Priya.")
    expect((await call(gw, "POST", `/api/sessions/${sid}/end`)).status).toBe(200)
    let l4: {
      entries: ReadonlyArray<{ id: string; text: string; sources: ReadonlyArray<{ session: string }> }>
    } = {
      entries: []
    }
    for (let i = 0; i < 100; i++) {
      l4 = (await call(gw, "GET", "/api/memory?level=L4")).json
      if (l4.entries.some((e) => e.sources.some((s) => s.session === sid))) break
      await new Promise((r) => setTimeout(r, 20))
    }
    const mine = l4.entries.filter((e) => e.sources.some((s) => s.session === sid))
    expect(mine).toHaveLength(1)
    expect(mine[0]!.text).toContain("on-call rotation starts 2026-12-07")
    const l3 = await call(gw, "GET", "/api/memory?level=L3")
    expect(l3.json.entries.some((e: { id: string }) => e.id === `L3:${mine[0]!.id.slice(3)}`)).toBe(true)

    const pinned = await call(gw, "POST", `/api/memory/${mine[0]!.id}/pin`, { pinned: true })
    expect(pinned.json).toMatchObject({ level: "L4", pinned: true })
    expect((await call(gw, "POST", "/api/memory/persist")).status).toBe(202)
    expect((await call(gw, "DELETE", "/api/memory/L2:whatever")).status).toBe(404)
  })
})

describe("tenants", () => {
  it("keeps each tenant's memory to itself", async () => {
    const tenants = await startGateway({
      apiKeys: [
        { key: "key-a", tenant: "a" },
        { key: "key-b", tenant: "b" }
      ]
    })
    try {
      const as = (key: string) => ({ authorization: `Bearer ${key}` })
      expect(
        (await call(tenants, "POST", "/api/sessions", { id: "shared", concept: "x" }, as("key-a"))).status
      ).toBe(201)
      const mine = await call(tenants, "GET", "/api/sessions/shared/memory?level=L1", undefined, as("key-a"))
      expect(mine.status).toBe(200)
      const theirs = await call(
        tenants,
        "GET",
        "/api/sessions/shared/memory?level=L1",
        undefined,
        as("key-b")
      )
      expect(theirs.status).toBe(404)
    } finally {
      await tenants.close()
    }
  })
})
