/**
 * Many sessions through the gateway: the lifecycle (pause, resume, end; illegal transitions are a
 * 409 naming the session, its state and the transition), chat refused on paused and ended
 * sessions on every path (the SSE chat, `/v1/chat/completions` with the official openai SDK,
 * streaming or not, and its dry run) while previews stay allowed, metadata updates, tasks, and
 * the distribution of a task (broadcast, filtered, skipped sessions, Idempotency-Key), tenants
 * kept apart.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { Api } from "@ctxo/api/Api"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import { Effect, Option, Redacted } from "effect"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, chatEvents, createSession, historyText as historyOnDisk, startGateway } from "./harness.ts"

type Gateway = Awaited<ReturnType<typeof startGateway>>

let gw: Gateway
let openai: OpenAI
beforeAll(async () => {
  gw = await startGateway()
  openai = new OpenAI({ apiKey: "unused", baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
})
afterAll(() => gw.close())

const api = HttpApiClient.make(Api)

/** A JSON request as any client sends it: the status and the parsed body. */

const historyText = (sid: string) => {
  try {
    return historyOnDisk(gw.dataDir, sid)
  } catch {
    return ""
  }
}

describe("session lifecycle", () => {
  it("reads sessions of an older sessions.json as active, with the time they were created", async () => {
    const listed = await call(gw, "GET", "/api/sessions")
    expect(listed.status).toBe(200)
    const auth = listed.json.find((s: { id: string }) => s.id === "code-agent-auth")
    expect(auth).toEqual({
      id: "code-agent-auth",
      concept: "Fix the login bug",
      createdAt: "2026-11-02T14:30:00.000Z",
      state: "active",
      stateChangedAt: "2026-11-02T14:30:00.000Z",
      metadata: {}
    })
  })

  it("pauses, resumes and ends; pausing twice changes nothing; an ended session cannot come back (409)", async () => {
    const out = await gw.run(
      Effect.gen(function* () {
        const client = yield* api
        const created = yield* client.sessions.create({
          payload: { id: "life", concept: "Lifecycle", metadata: { team: "physics" } }
        })
        const paused = yield* client.sessions.pause({ path: { id: "life" } })
        const again = yield* client.sessions.pause({ path: { id: "life" } })
        const got = yield* client.sessions.get({ path: { id: "life" } })
        const resumed = yield* client.sessions.resume({ path: { id: "life" } })
        const ended = yield* client.sessions.end({ path: { id: "life" } })
        const endedAgain = yield* client.sessions.end({ path: { id: "life" } })
        const back = yield* Effect.flip(client.sessions.resume({ path: { id: "life" } }))
        const pausedEnded = yield* Effect.flip(client.sessions.pause({ path: { id: "life" } }))
        const unknown = yield* Effect.flip(client.sessions.pause({ path: { id: "nope" } }))
        return { created, paused, again, got, resumed, ended, endedAgain, back, pausedEnded, unknown }
      })
    )
    expect(out.created).toMatchObject({ state: "active", metadata: { team: "physics" } })
    expect(out.created.stateChangedAt).toBe(out.created.createdAt)
    expect(out.paused.state).toBe("paused")
    expect(out.again).toEqual(out.paused)
    expect(out.got).toEqual(out.paused)
    expect(out.resumed.state).toBe("active")
    expect(out.ended.state).toBe("ended")
    expect(out.endedAgain).toEqual(out.ended)
    expect(out.back).toMatchObject({
      _tag: "Conflict",
      tag: "IllegalTransition",
      message: "Session life is ended, so it cannot resume (ended -> active): an ended session is final",
      details: { sessionId: "life", state: "ended", action: "resume" }
    })
    expect(out.pausedEnded).toMatchObject({ _tag: "Conflict", tag: "IllegalTransition" })
    expect(out.unknown).toMatchObject({ _tag: "NotFound", tag: "SessionNotFound" })
    const listed = await call(gw, "GET", "/api/sessions")
    expect(listed.json.find((s: { id: string }) => s.id === "life")).toMatchObject({ state: "ended" })
    // The wire: one sentence, the state in the details.
    const wire = await call(gw, "POST", "/api/sessions/life/resume")
    expect(wire.status).toBe(409)
    expect(wire.json.error.details).toEqual({ sessionId: "life", state: "ended", action: "resume" })
  })

  it("merges metadata on PATCH (null removes a key) and names a field it refuses", async () => {
    await createSession(gw, "meta")
    const set = await call(gw, "PATCH", "/api/sessions/meta", { metadata: { team: "web", lang: "ts" } })
    expect(set.status, set.text).toBe(200)
    const merged = await call(gw, "PATCH", "/api/sessions/meta", {
      concept: "Renamed",
      metadata: { lang: null, owner: "ada" }
    })
    expect(merged.json).toMatchObject({ concept: "Renamed", metadata: { team: "web", owner: "ada" } })
    expect(merged.json.metadata).not.toHaveProperty("lang")
    const badKey = await call(gw, "PATCH", "/api/sessions/meta", { metadata: { "has space": "x" } })
    expect(badKey.status).toBe(400)
    expect(badKey.json.error.message).toMatch(/^metadata/)
    const badCreate = await call(gw, "POST", "/api/sessions", { id: "m2", concept: "", metadata: { a: 1 } })
    expect(badCreate.status).toBe(400)
    expect(badCreate.json.error.message).toBe("metadata.a: expected string, got 1")
    expect((await call(gw, "GET", "/api/sessions/m2")).status).toBe(404)
  })
})

describe("chat on a paused or ended session", () => {
  const sid = "chat-life"
  const refused = (state: string) => ({
    error: {
      tag: "SessionNotActive",
      message:
        state === "paused"
          ? `Session ${sid} is paused, so it cannot take a turn until it is resumed`
          : `Session ${sid} is ended, so it cannot take a turn: an ended session is final`,
      details: { sessionId: sid, state, operation: "take a turn" }
    }
  })

  it("answers 409 with the state on the SSE chat and /v1 (the openai SDK, streaming or not, dry run too), calls no model and records nothing; previews stay", async () => {
    await createSession(gw, sid)
    gw.upstream.script({ type: "text", text: "First answer." })
    const first = await gw.run(chatEvents(sid, { message: "Hello", model: "gpt-4o" }))
    expect(first.events.at(-1)?.event).toBe("done")

    for (const state of ["paused", "ended"] as const) {
      const recorded = historyText(sid)
      expect(
        (await call(gw, "POST", `/api/sessions/${sid}/${state === "paused" ? "pause" : "end"}`)).status
      ).toBe(200)
      const calls = gw.upstream.requests.length
      for (const path of [`/api/sessions/${sid}/chat`, `/api/session/${sid}/chat`]) {
        const sse = await call(gw, "POST", path, { message: "Are you there?" })
        expect(sse.status, sse.text).toBe(409)
        expect(sse.contentType).toMatch(/^application\/json/)
        expect(sse.json).toEqual(refused(state))
      }
      const options = { headers: { "X-Ctxo-Session": sid } }
      const request = { model: "gpt-4o", messages: [{ role: "user" as const, content: "Are you there?" }] }
      for (const stream of [false, true]) {
        const error = await openai.chat.completions
          .create({ ...request, stream } as OpenAI.ChatCompletionCreateParamsNonStreaming, options)
          .then(
            () => undefined,
            (e: unknown) => e
          )
        expect(error).toBeInstanceOf(OpenAI.ConflictError)
        expect(error).toMatchObject({ status: 409, code: "session_not_active" })
        expect((error as Error).message).toContain(`Session ${sid} is ${state}`)
      }
      const dry = await openai.chat.completions
        .create(request, { headers: { "X-Ctxo-Session": sid, "x-ctxo-record": "false" } })
        .then(
          () => undefined,
          (e: unknown) => e
        )
      expect(dry).toBeInstanceOf(OpenAI.ConflictError)
      expect(gw.upstream.requests.length).toBe(calls)
      expect(historyText(sid)).toBe(recorded)
      // Reading stays allowed: the preview, the files, the tasks.
      const preview = await call(gw, "GET", `/api/sessions/${sid}/context-preview?query=Next`)
      expect(preview.status, preview.text).toBe(200)
      expect((await call(gw, "GET", `/api/sessions/${sid}/tasks`)).status).toBe(200)
      if (state === "paused") {
        expect((await call(gw, "POST", `/api/sessions/${sid}/resume`)).status).toBe(200)
        gw.upstream.script({ type: "text", text: "Back again." })
        const resumed = await gw.run(chatEvents(sid, { message: "Are you back?", model: "gpt-4o" }))
        expect(resumed.status).toBe(200)
        expect(resumed.events.at(-1)).toMatchObject({ event: "done", data: { text: "Back again." } })
        const completion = await openai.chat.completions.create(
          { model: "gpt-4o", messages: [{ role: "user", content: "And now?" }] },
          { headers: { "X-Ctxo-Session": sid } }
        )
        expect(completion.choices[0]?.message.content).toBeTypeOf("string")
      }
    }
  })
})

describe("tasks in a session", () => {
  it("adds, lists and changes tasks; an unknown task is 404, a bad status 400 naming the field, an ended session 409", async () => {
    await createSession(gw, "todo")
    const added = await call(gw, "POST", "/api/sessions/todo/tasks", {
      title: "Read chapter 2",
      description: "Take notes"
    })
    expect(added.status, added.text).toBe(201)
    expect(added.json).toMatchObject({
      title: "Read chapter 2",
      description: "Take notes",
      status: "pending"
    })
    const second = (await call(gw, "POST", "/api/sessions/todo/tasks", { title: "Summarize" })).json
    const listed = await call(gw, "GET", "/api/sessions/todo/tasks")
    expect(listed.json.map((t: { id: string }) => t.id)).toEqual([added.json.id, second.id])

    const started = await call(gw, "PATCH", `/api/sessions/todo/tasks/${added.json.id}`, {
      status: "in_progress"
    })
    expect(started.status, started.text).toBe(200)
    expect(started.json).toMatchObject({ id: added.json.id, status: "in_progress", title: "Read chapter 2" })
    const edited = await call(gw, "PATCH", `/api/sessions/todo/tasks/${second.id}`, {
      title: "Summarize chapter 2",
      description: "One page",
      status: "done"
    })
    expect(edited.json).toMatchObject({
      title: "Summarize chapter 2",
      description: "One page",
      status: "done"
    })
    const cleared = await call(gw, "PATCH", `/api/sessions/todo/tasks/${second.id}`, { description: null })
    expect(cleared.json).not.toHaveProperty("description")

    const unknown = await call(gw, "PATCH", "/api/sessions/todo/tasks/t-missing", { status: "done" })
    expect(unknown.status).toBe(404)
    expect(unknown.json.error).toMatchObject({
      tag: "TaskNotFound",
      message: "Session todo has no task t-missing"
    })
    const badStatus = await call(gw, "PATCH", `/api/sessions/todo/tasks/${second.id}`, { status: "finished" })
    expect(badStatus.status).toBe(400)
    expect(badStatus.json.error.message).toBe(
      'status: expected "pending", "in_progress", "done" or "cancelled", got "finished"'
    )
    const noTitle = await call(gw, "POST", "/api/sessions/todo/tasks", { title: "" })
    expect(noTitle.status).toBe(400)
    expect(noTitle.json.error.message).toMatch(/^title/)
    expect((await call(gw, "GET", "/api/sessions/nope/tasks")).status).toBe(404)

    // A paused session takes tasks; an ended one neither takes nor changes them.
    await call(gw, "POST", "/api/sessions/todo/pause")
    expect((await call(gw, "POST", "/api/sessions/todo/tasks", { title: "While paused" })).status).toBe(201)
    await call(gw, "POST", "/api/sessions/todo/end")
    const late = await call(gw, "POST", "/api/sessions/todo/tasks", { title: "Too late" })
    expect(late.status).toBe(409)
    expect(late.json.error).toMatchObject({
      tag: "SessionNotActive",
      message: "Session todo is ended, so it cannot take a new task: an ended session is final",
      details: { state: "ended" }
    })
    expect(
      (await call(gw, "PATCH", `/api/sessions/todo/tasks/${second.id}`, { status: "pending" })).status
    ).toBe(409)
    const file = JSON.parse(readFileSync(join(gw.dataDir, "todo", "tasks.json"), "utf8"))
    expect(file.map((t: { title: string }) => t.title)).toEqual([
      "Read chapter 2",
      "Summarize chapter 2",
      "While paused"
    ])
  })
})

describe("task distribution", () => {
  beforeAll(async () => {
    for (const [id, concept, metadata] of [
      ["dist-a", "Quantum notes", { team: "physics" }],
      ["dist-b", "Quantum homework", { team: "physics", level: "intro" }],
      ["dist-c", "Login bug", { team: "web" }],
      ["dist-d", "Old quantum project", { team: "physics" }],
      ["dist-p", "Paused quantum work", { team: "physics" }]
    ] as const) {
      const created = await call(gw, "POST", "/api/sessions", { id, concept, metadata })
      expect(created.status, created.text).toBe(201)
    }
    await call(gw, "POST", "/api/sessions/dist-d/end")
    await call(gw, "POST", "/api/sessions/dist-p/pause")
  })
  const tasksOf = async (sid: string) =>
    (await call(gw, "GET", `/api/sessions/${sid}/tasks`)).json as ReadonlyArray<{
      id: string
      title: string
      origin?: { distributionId: string; fromSession?: string }
    }>

  it("broadcasts to the listed sessions: ended ones skipped with the reason, paused ones receive it", async () => {
    const out = await call(gw, "POST", "/api/tasks/distribute", {
      task: { title: "Review the plan", description: "Before Friday" },
      mode: "broadcast",
      sessions: ["dist-a", "dist-d", "dist-p", "ghost"],
      fromSession: "dist-c"
    })
    expect(out.status, out.text).toBe(200)
    expect(out.json).toMatchObject({
      distributionId: expect.stringMatching(/^d-/),
      mode: "broadcast",
      replayed: false
    })
    expect(out.json.results).toEqual([
      { session: "dist-a", taskId: expect.stringMatching(/^t-/) },
      { session: "dist-d", skipped: "ended", message: "Session dist-d is ended" },
      { session: "dist-p", taskId: expect.stringMatching(/^t-/) },
      { session: "ghost", skipped: "not_found", message: "No session ghost" }
    ])
    const [a] = await tasksOf("dist-a")
    expect(a).toMatchObject({
      id: out.json.results[0].taskId,
      title: "Review the plan",
      description: "Before Friday",
      status: "pending",
      origin: { distributionId: out.json.distributionId, fromSession: "dist-c" }
    })
    expect(await tasksOf("dist-d")).toEqual([])
    expect(await tasksOf("dist-c")).toEqual([])
  })

  it("filters all sessions on metadata and concept, or the listed ones (reporting those that do not match)", async () => {
    const physics = await call(gw, "POST", "/api/tasks/distribute", {
      task: { title: "Check the units" },
      mode: "filtered",
      filter: { metadata: { team: "physics" }, concept: "QUANTUM" }
    })
    expect(physics.status, physics.text).toBe(200)
    expect(
      physics.json.results.map(
        (r: { session: string; skipped?: string }) => `${r.session}:${r.skipped ?? "task"}`
      )
    ).toEqual(["dist-a:task", "dist-b:task", "dist-d:ended", "dist-p:task"])
    const listed = await call(gw, "POST", "/api/tasks/distribute", {
      task: { title: "Intro only" },
      mode: "filtered",
      sessions: ["dist-a", "dist-b"],
      filter: { metadata: { level: "intro" } }
    })
    expect(listed.json.results).toEqual([
      { session: "dist-a", skipped: "not_matched", message: "Session dist-a does not match the filter" },
      { session: "dist-b", taskId: expect.stringMatching(/^t-/) }
    ])
    const noFilter = await call(gw, "POST", "/api/tasks/distribute", {
      task: { title: "x" },
      mode: "filtered"
    })
    expect(noFilter.status).toBe(400)
    expect(noFilter.json.error).toMatchObject({ tag: "InvalidControllerInput", details: { field: "filter" } })
    const badMode = await call(gw, "POST", "/api/tasks/distribute", {
      task: { title: "x" },
      mode: "everyone"
    })
    expect(badMode.status).toBe(400)
    expect(badMode.json.error.message).toMatch(/^mode: expected "broadcast" or "filtered"/)
  })

  it("answers a retry with the same Idempotency-Key as the first time (no task twice), and 409 for the key reused", async () => {
    const body = { task: { title: "Exactly once" }, mode: "broadcast", sessions: ["dist-a", "dist-b"] }
    const key = { "Idempotency-Key": "dist-once-1" }
    const first = await call(gw, "POST", "/api/tasks/distribute", body, key)
    const retries = await Promise.all(
      Array.from({ length: 4 }, () => call(gw, "POST", "/api/tasks/distribute", body, key))
    )
    for (const retry of retries) {
      expect(retry.status).toBe(200)
      expect(retry.json).toEqual({ ...first.json, replayed: true })
    }
    expect((await tasksOf("dist-b")).filter((t) => t.title === "Exactly once")).toHaveLength(1)
    const reused = await call(gw, "POST", "/api/tasks/distribute", { ...body, task: { title: "Other" } }, key)
    expect(reused.status).toBe(409)
    expect(reused.json.error).toMatchObject({
      tag: "DistributionConflict",
      details: { key: "dist-once-1", distributionId: first.json.distributionId }
    })
    const log = JSON.parse(readFileSync(join(gw.dataDir, "distributions.json"), "utf8"))
    expect(log.filter((d: { idempotencyKey?: string }) => d.idempotencyKey === "dist-once-1")).toHaveLength(1)
  })
})

describe("tenants", () => {
  const keyA = "tenant-a-key-0123456789"
  const keyB = "tenant-b-key-0123456789"
  let tenants: Gateway
  beforeAll(async () => {
    tenants = await startGateway({
      apiKeys: [
        { key: keyA, tenant: "acme" },
        { key: keyB, tenant: "globex" }
      ],
      adminKey: Option.some(Redacted.make("admin-key-0123456789"))
    })
  })
  afterAll(() => tenants?.close())
  const as = (key: string) => ({ authorization: `Bearer ${key}` })

  it("keeps another tenant's sessions out of its lifecycle, tasks and distributions", async () => {
    const created = await call(
      tenants,
      "POST",
      "/api/sessions",
      { id: "plan", concept: "acme plan" },
      as(keyA)
    )
    expect(created.status, created.text).toBe(201)
    for (const [method, path, body] of [
      ["POST", "/api/sessions/plan/pause", undefined],
      ["POST", "/api/sessions/plan/end", undefined],
      ["PATCH", "/api/sessions/plan", { metadata: { x: "y" } }],
      ["GET", "/api/sessions/plan/tasks", undefined],
      ["POST", "/api/sessions/plan/tasks", { title: "sneaky" }]
    ] as const)
      expect([method, path, (await call(tenants, method, path, body, as(keyB))).status]).toEqual([
        method,
        path,
        404
      ])
    // globex's broadcast reaches none of acme's sessions, and a listed one is unknown to it.
    const all = await call(
      tenants,
      "POST",
      "/api/tasks/distribute",
      { task: { title: "All" }, mode: "broadcast" },
      as(keyB)
    )
    expect(all.status, all.text).toBe(200)
    expect(all.json.results).toEqual([])
    const listed = await call(
      tenants,
      "POST",
      "/api/tasks/distribute",
      { task: { title: "Listed" }, mode: "broadcast", sessions: ["plan"] },
      as(keyB)
    )
    expect(listed.json.results).toEqual([
      { session: "plan", skipped: "not_found", message: "No session plan" }
    ])
    // The same key in two tenants is two distributions.
    const key = { "Idempotency-Key": "shared-key" }
    const ofA = await call(
      tenants,
      "POST",
      "/api/tasks/distribute",
      { task: { title: "A" }, mode: "broadcast" },
      { ...as(keyA), ...key }
    )
    const ofB = await call(
      tenants,
      "POST",
      "/api/tasks/distribute",
      { task: { title: "B" }, mode: "broadcast" },
      { ...as(keyB), ...key }
    )
    expect([ofA.status, ofB.status]).toEqual([200, 200])
    expect(ofA.json.results).toEqual([{ session: "plan", taskId: expect.stringMatching(/^t-/) }])
    const acmeTasks = (await call(tenants, "GET", "/api/sessions/plan/tasks", undefined, as(keyA))).json
    expect(acmeTasks.map((t: { title: string }) => t.title)).toEqual(["A"])
    expect((await call(tenants, "GET", "/api/sessions/plan", undefined, as(keyA))).json.state).toBe("active")
  })
})
