/**
 * The client against a real gateway (in this process, its local model answering): the contract's
 * endpoints as promises and as Effect, typed errors in one sentence, the chat streamed with the
 * shared accumulator (its parts equal the gateway's), a retry with the same key, a refused chat,
 * previews read for people, the Node example as documented, and a browser bundle with no Node code.
 */
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { Effect, Either } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ChatRefused, chat, newIdempotencyKey } from "../src/Chat.ts"
import { connect, describeError, layer, make } from "../src/Client.ts"
import { readPreview } from "../src/Preview.ts"
import { startGateway } from "./gateway.ts"

let gw: Awaited<ReturnType<typeof startGateway>>
let client: ReturnType<typeof connect>
beforeAll(async () => {
  gw = await startGateway()
  client = connect({ baseUrl: gw.baseUrl })
})
afterAll(async () => {
  await client?.dispose()
  await gw?.close()
})

describe("the contract's endpoints", () => {
  it("as promises: list, create, pause and resume a session", async () => {
    const sessions = await client.api.sessions.list()
    expect(sessions.map((s) => s.id)).toEqual(["notebook-physics", "code-agent-auth"])
    const created = await client.api.sessions.create({
      payload: { id: "from-client", concept: "client test" }
    })
    expect(created).toMatchObject({ id: "from-client", state: "active" })
    expect((await client.api.sessions.pause({ path: { id: "from-client" } })).state).toBe("paused")
    expect((await client.api.sessions.resume({ path: { id: "from-client" } })).state).toBe("active")
  })

  it("rejects with the gateway's typed error, said in one sentence", async () => {
    const error = await client.api.sessions.get({ path: { id: "ghost" } }).catch((e: unknown) => e)
    expect(error).toMatchObject({ _tag: "NotFound", tag: "SessionNotFound" })
    expect(describeError(error)).toBe("SessionNotFound: No session ghost")
    const unreachable = connect({ baseUrl: "http://127.0.0.1:9" })
    const refused = await unreachable.api.sessions.list().catch((e: unknown) => e)
    await unreachable.dispose()
    expect(describeError(refused)).toMatch(/^The gateway did not answer/)
  })

  it("as Effect, on the fetch client", async () => {
    const models = await Effect.runPromise(
      Effect.flatMap(make({ baseUrl: gw.baseUrl }), (c) => c.openai.models()).pipe(Effect.provide(layer))
    )
    expect(models.data.map((m) => m.id)).toContain("openai/gpt-4o")
  })
})

describe("a chat turn", () => {
  it("streams in several deltas; the parts it accumulates are the gateway's; a retry with the same key resumes", async () => {
    const key = newIdempotencyKey()
    const seen: Array<string> = []
    const body = { message: "Explain [guidance.md:4:5] briefly, please, in a few words", idempotencyKey: key }
    const turn = await chat(client, "notebook-physics", body, { onEvent: (e) => seen.push(e.type) })
    expect(turn.error).toBeUndefined()
    expect(seen[0]).toBe("turn")
    expect(seen.at(-1)).toBe("done")
    expect(turn.deltas).toBeGreaterThan(1)
    expect(turn.partsMatchServer).toBe(true)
    expect(turn.done?.text).toContain("You said: Explain [guidance.md:4:5]")

    const retried = await chat(client, "notebook-physics", body)
    expect(retried).toMatchObject({ turn: turn.turn, resumed: true })
    expect(retried.done?.text).toBe(turn.done?.text)
    expect(retried.partsMatchServer).toBeUndefined()
    // The input was recorded once.
    const history = await client.api.history.list({ path: { id: "notebook-physics" } })
    const inputs = history.turns.flatMap((t) => t.messages).filter((m) => m.kind === "input")
    expect(inputs.filter((m) => JSON.stringify(m.parts).includes(body.message))).toHaveLength(1)
  })

  it("is refused before its stream starts when the session is paused", async () => {
    await client.api.sessions.create({ payload: { id: "paused-chat", concept: "x" } })
    await client.api.sessions.pause({ path: { id: "paused-chat" } })
    const error = await chat(client, "paused-chat", { message: "hello" }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ChatRefused)
    expect(error).toMatchObject({ status: 409, tag: "SessionNotActive" })
    expect(describeError(error)).toContain("is paused")
  })
})

describe("a preview read for people", () => {
  it("has its report and prefix typed, the static layers, the cuts and the request as text", async () => {
    const preview = await client.api.context.preview({
      path: { id: "code-agent-auth" },
      urlParams: { model: "gpt-4o", format: "anthropic" }
    })
    const view = readPreview(preview)
    expect(Either.isRight(view)).toBe(true)
    if (Either.isLeft(view)) return
    const { report, prefix, staticLayers, requestText } = view.right
    expect(report.window.tokens).toBe(128_000)
    expect(report.total).toBeLessThanOrEqual(report.available)
    expect(prefix.hash).toMatch(/^[0-9a-f]{16}$/)
    expect(staticLayers[0]).toBe("system_prompt")
    expect(staticLayers).not.toContain("query")
    expect(JSON.parse(requestText).system).toContain("# Code law")
    expect(Either.isLeft(readPreview({ ...preview, report: { model: 1 } }))).toBe(true)
  })
})

describe("the Node example in the README", () => {
  it("runs as documented and prints what it says", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx/esm", fileURLToPath(new URL("../examples/node.ts", import.meta.url))],
      { env: { ...process.env, CTXO_URL: gw.baseUrl }, cwd: fileURLToPath(new URL("..", import.meta.url)) }
    )
    expect(stdout).toMatch(/^sessions: notebook-physics \(active\), code-agent-auth \(active\)/)
    expect(stdout).toMatch(/preview: \d+ of \d+ tokens, prefix [0-9a-f]{16}/)
    expect(stdout).toMatch(/turn \d+: \d+ deltas, parts as the gateway's: true/)
  })
})

describe("in a browser", () => {
  it("bundles for the browser without any Node module", async () => {
    const { build } = await import("esbuild")
    const result = await build({
      entryPoints: ["Client", "Chat", "Preview"].map((m) =>
        fileURLToPath(new URL(`../src/${m}.ts`, import.meta.url))
      ),
      bundle: true,
      platform: "browser",
      format: "esm",
      write: false,
      outdir: "out",
      logLevel: "silent"
    })
    expect(result.errors).toEqual([])
    expect(result.outputFiles.map((f) => f.text).join("")).not.toMatch(/from\s*"node:|require\("node:/)
  })
})
