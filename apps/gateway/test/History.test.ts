/**
 * A session's history over HTTP: turns as stored with what a model sees of each message, pin,
 * exclude and restore changing what the next request carries, summaries with the turns they
 * archived, and the request the last turn sent first (for a diff against the next one).
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, chatEvents, createSession, startGateway } from "./harness.ts"

let gw: Awaited<ReturnType<typeof startGateway>>
beforeAll(async () => {
  gw = await startGateway()
})
afterAll(() => gw.close())

const sid = "code-agent-auth"
const preview = async (id: string) => {
  const r = await call(gw, "GET", `/api/sessions/${id}/context-preview?model=gpt-4o&query=next`)
  expect(r.status, r.text).toBe(200)
  return r.json
}

describe("a session's history", () => {
  it("lists its turns as stored, every message with its kind, pins and curation", async () => {
    const r = await call(gw, "GET", `/api/sessions/${sid}/history`)
    expect(r.status).toBe(200)
    expect(r.json.sessionId).toBe(sid)
    expect(r.json.summaries).toEqual([])
    expect(r.json.turns).toHaveLength(1)
    const [turn] = r.json.turns
    expect(turn).toMatchObject({ turn: 1, finished: true, pinned: false })
    expect(turn.messages.map((m: { id: string; kind: string }) => [m.id, m.kind])).toEqual([
      ["t1-0", "input"],
      ["t1-1", "step"],
      ["t1-2", "step"],
      ["t1-3", "step"],
      ["t1-4", "step"],
      ["t1-5", "final"]
    ])
    expect(turn.messages[2].parts[0]._tag).toBe("tool-result")
  })

  it("pins a turn: the next request carries it as a pinned turn; a pinned message cannot be excluded", async () => {
    const pinned = await call(gw, "POST", `/api/sessions/${sid}/history/turns/1/pin`, {})
    expect(pinned.status, pinned.text).toBe(200)
    expect(pinned.json).toMatchObject({ turn: 1, pinned: true })
    expect(pinned.json.messages[0]).toMatchObject({ id: "t1-0", pinned: true })
    const sources = (await preview(sid)).report.sources.map((s: { id: string }) => s.id)
    expect(sources).toContain("pinned_history")

    const refused = await call(gw, "POST", `/api/sessions/${sid}/history/messages/t1-0/exclude`, {})
    expect(refused.status).toBe(422)
    expect(refused.json.error.message).toContain("pinned")

    const unpinned = await call(gw, "POST", `/api/sessions/${sid}/history/turns/1/pin`, { pinned: false })
    expect(unpinned.json.pinned).toBe(false)
    expect(unpinned.json.messages.some((m: { pinned: boolean }) => m.pinned)).toBe(false)
    expect((await preview(sid)).report.sources.map((s: { id: string }) => s.id)).not.toContain(
      "pinned_history"
    )
  })

  it("excludes a tool result: the model sees the placeholder with the reason; restore brings it back", async () => {
    const before = JSON.stringify((await preview(sid)).request)
    expect(before).toContain("isExpired")
    const excluded = await call(gw, "POST", `/api/sessions/${sid}/history/messages/t1-4/exclude`, {
      reason: "the file is shown elsewhere"
    })
    expect(excluded.status, excluded.text).toBe(200)
    expect(excluded.json.dismissed).toEqual({ by: "user", summary: "the file is shown elsewhere" })
    expect(excluded.json.placeholder).toMatch(/result — excluded by the user: the file is shown elsewhere\]$/)
    const request = JSON.stringify((await preview(sid)).request)
    expect(request).toContain("excluded by the user: the file is shown elsewhere")

    const listed = await call(gw, "GET", `/api/sessions/${sid}/history`)
    expect(listed.json.turns[0].messages[4].placeholder).toBe(excluded.json.placeholder)

    const restored = await call(gw, "POST", `/api/sessions/${sid}/history/messages/t1-4/restore`)
    expect(restored.status).toBe(200)
    expect(restored.json.dismissed).toBeUndefined()
    expect(restored.json.placeholder).toBeUndefined()
    expect(JSON.stringify((await preview(sid)).request)).not.toContain("excluded by the user")
  })

  it("names what it cannot find or change, in one sentence", async () => {
    const noTurn = await call(gw, "POST", `/api/sessions/${sid}/history/turns/9/pin`, {})
    expect(noTurn.status).toBe(422)
    expect(noTurn.json.error.message).toContain("no such turn")
    const noMessage = await call(gw, "POST", `/api/sessions/${sid}/history/messages/nope/restore`)
    expect(noMessage.status).toBe(422)
    expect(noMessage.json.error.tag).toBe("MessageNotFound")
    const badTurn = await call(gw, "POST", `/api/sessions/${sid}/history/turns/zero/pin`, {})
    expect(badTurn.status).toBe(400)
    const noSession = await call(gw, "GET", "/api/sessions/ghost/history")
    expect(noSession.status).toBe(404)
    const unknownField = await call(gw, "POST", `/api/sessions/${sid}/history/turns/1/pin`, { pin: true })
    expect(unknownField.status).toBe(400)
  })

  it("shows summaries with the turns they archived; an archived turn cannot be pinned", async () => {
    const id = await createSession(gw, "summarized")
    const message = (
      turn: number,
      n: number,
      role: string,
      kind: string,
      text: string,
      archived: boolean
    ) => ({
      id: `t${turn}-${n}`,
      role,
      parts: [{ _tag: "text", text }],
      meta: {
        turn,
        kind,
        ...(kind === "final" ? { finished: true } : {}),
        ...(archived ? { archivedBy: "s-1" } : {})
      }
    })
    const doc = {
      format: "ctxo.history/v1",
      messages: [1, 2, 3].flatMap((t) => [
        message(t, 0, "user", "input", `question ${t}`, t < 3),
        message(t, 1, "assistant", "final", `answer ${t}`, t < 3)
      ]),
      compression: [{ id: "s-1", text: "Turns 1 and 2 in short.", fromTurn: 1, toTurn: 2, messageCount: 4 }]
    }
    mkdirSync(join(gw.dataDir, id), { recursive: true })
    writeFileSync(join(gw.dataDir, id, "messages.json"), JSON.stringify(doc))
    const r = await call(gw, "GET", `/api/sessions/${id}/history`)
    expect(r.json.summaries).toEqual([
      { id: "s-1", text: "Turns 1 and 2 in short.", fromTurn: 1, toTurn: 2, messageCount: 4, turns: [1, 2] }
    ])
    expect(
      r.json.turns.map((t: { turn: number; archivedBy?: string }) => [t.turn, t.archivedBy ?? null])
    ).toEqual([
      [1, "s-1"],
      [2, "s-1"],
      [3, null]
    ])
    const refused = await call(gw, "POST", `/api/sessions/${id}/history/turns/1/pin`, {})
    expect(refused.status).toBe(422)
    expect(refused.json.error.message).toContain("archived it into s-1")
  })
})

describe("the previous turn's request", () => {
  it("is 404 NoTurnYet before a session has a turn", async () => {
    const id = await createSession(gw, "fresh")
    const r = await call(gw, "GET", `/api/sessions/${id}/context-preview/previous`)
    expect(r.status).toBe(404)
    expect(r.json.error.tag).toBe("NoTurnYet")
  })

  it("is the last turn's input over the history before it, in the format asked", async () => {
    const id = await createSession(gw, "two-turns")
    for (const message of ["first question", "second question"])
      expect((await gw.run(chatEvents(id, { message, model: "gpt-4o" }))).events.at(-1)?.event).toBe("done")
    const previous = await call(gw, "GET", `/api/sessions/${id}/context-preview/previous?model=gpt-4o`)
    expect(previous.status, previous.text).toBe(200)
    const messages = previous.json.request.messages as Array<{ role: string; content: string }>
    const users = messages.filter((m) => m.role === "user").map((m) => m.content)
    expect(users[0]).toContain("first question")
    expect(users.at(-1)).toContain("second question")
    // What the model answered in that turn is not in the request that asked it.
    expect(JSON.stringify(messages)).not.toContain("You said: second question")
    // The next request shows that answer as history.
    expect(JSON.stringify((await preview(id)).request)).toContain("You said: second question")

    const react = await call(
      gw,
      "GET",
      `/api/sessions/${id}/context-preview/previous?model=gpt-4o&format=react`
    )
    expect(react.json.format).toBe("react")
    expect(react.json.request.prompt).toContain("second question")
  })
})
