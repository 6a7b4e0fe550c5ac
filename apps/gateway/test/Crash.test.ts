import { type ChildProcess, spawn } from "node:child_process"
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { basename, join } from "node:path"
import { fileURLToPath } from "node:url"
import { startFakeUpstream } from "@ctxo/agent/FakeUpstream"
import { HistoryDocument } from "@ctxo/history/Message"
import { readJournal } from "@ctxo/store/HistoryJournal"
import { Either, Schema } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { exampleData, historyText } from "./harness.ts"
import { freePort } from "./spawned.ts"

const children: Array<ChildProcess> = []
const folders: Array<string> = []
afterAll(async () => {
  await Promise.all(
    children.map((c) => {
      if (c.exitCode !== null || c.signalCode !== null) return Promise.resolve()
      const exited = new Promise((r) => c.once("exit", r))
      c.kill("SIGKILL")
      return exited
    })
  )
  for (const folder of folders) rmSync(folder, { recursive: true, force: true })
})

/** A data root for one test, a copy of the example data, removed after the tests. */
const dataRoot = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  folders.push(dir)
  cpSync(exampleData, dir, { recursive: true })
  return dir
}

/** What an interrupted atomic write leaves: `*.ctxo-tmp`, or `.*.tmp` from before the store. */
const isTemporary = (file: string) => /\.ctxo-tmp$/.test(basename(file)) || /^\..*\.tmp$/.test(basename(file))

const startChild = async (dataDir: string, env: Record<string, string> = {}) => {
  const port = await freePort()
  const child = spawn(
    process.execPath,
    ["--import", "tsx/esm", fileURLToPath(new URL("../src/main.ts", import.meta.url))],
    {
      env: {
        ...process.env,
        PORT: String(port),
        CTXO_DATA_DIR: dataDir,
        CTXO_UPSTREAM_API_KEY: "",
        CTXO_LOG_FORMAT: "json",
        ...env
      },
      stdio: ["ignore", "pipe", "pipe"]
    }
  )
  children.push(child)
  let log = ""
  child.stdout?.on("data", (d) => (log += d))
  child.stderr?.on("data", (d) => (log += d))
  const base = `http://127.0.0.1:${port}`
  for (let i = 0; i < 600; i++) {
    const ok = await fetch(`${base}/healthz`).then(
      (r) => r.ok,
      () => false
    )
    if (ok) return { child, base, log: () => log }
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`the gateway did not start:\n${log}`)
}

const walk = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)]
  )

describe("the gateway killed with SIGKILL during a stream of writes", () => {
  it("leaves every file valid and every acknowledged write in place", async () => {
    const dataDir = dataRoot("ctxo-crash-")
    const { child, base, log } = await startChild(dataDir)
    const acknowledgedFiles = new Map<string, string>()
    const acknowledgedChats: Array<string> = []
    let stop = false
    const writer = async (w: number) => {
      for (let i = 0; !stop; i++) {
        const path = `load/w${w}-${i % 5}.md`
        const content = `writer ${w} write ${i}\n${"x".repeat(20_000)}\n`
        const response = await fetch(
          `${base}/api/sessions/code-agent-auth/file?path=${encodeURIComponent(path)}`,
          {
            method: "PUT",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ content })
          }
        ).catch(() => undefined)
        if (response?.ok) acknowledgedFiles.set(path, content)
        else return
      }
    }
    const chatter = async () => {
      for (let i = 0; !stop; i++) {
        const message = `crash test message ${i}`
        const response = await fetch(`${base}/api/session/notebook-physics/chat`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ message, model: "gpt-4o" })
        }).catch(() => undefined)
        const text = response ? await response.text().catch(() => "") : ""
        if (text.includes("event: done")) acknowledgedChats.push(message)
        else return
      }
    }
    const running = [writer(1), writer(2), writer(3), chatter()]
    // Kill it in the middle of the load: once writes and chats have been acknowledged (slow machines
    // take longer to get there), while more are in flight.
    const deadline = Date.now() + 40_000
    while ((acknowledgedFiles.size < 10 || acknowledgedChats.length < 3) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 25))
    await new Promise((r) => setTimeout(r, 150))
    const exited = new Promise((r) => child.once("exit", r))
    child.kill("SIGKILL")
    stop = true
    await Promise.all([...running, exited])

    expect(acknowledgedFiles.size).toBeGreaterThan(0)
    expect(acknowledgedChats.length).toBeGreaterThan(0)
    // Every file the gateway writes is whole: JSON parses, the history decodes, a history journal
    // is good records (its last line may be torn: a record the kill cut, never acknowledged).
    const decodeHistory = Schema.decodeUnknownSync(Schema.parseJson(HistoryDocument))
    for (const file of walk(dataDir)) {
      if (isTemporary(file)) continue
      const text = readFileSync(file, "utf8")
      if (file.endsWith("messages.json")) decodeHistory(text)
      else if (file.endsWith("messages.journal")) expect(Either.isRight(readJournal(text)), file).toBe(true)
      else if (file.endsWith(".json")) JSON.parse(text)
      else if (file.includes("/load/")) expect(text).toMatch(/^writer \d+ write \d+\nx{20000}\n$/)
    }
    for (const [path, content] of acknowledgedFiles) {
      // The acknowledged write is there, or a later one of the same writer to the same path (one in
      // flight when it died may have landed): never an older one, never a torn file.
      const now = readFileSync(join(dataDir, "code-agent-auth", path), "utf8")
      const writeOf = (text: string) => Number(/^writer \d+ write (\d+)\n/.exec(text)?.[1] ?? -1)
      expect(now).toMatch(/^writer \d+ write \d+\nx{20000}\n$/)
      expect(writeOf(now)).toBeGreaterThanOrEqual(writeOf(content))
    }
    // Every acknowledged chat is in messages.json or its journal, once.
    const history = historyText(dataDir, "notebook-physics")
    decodeHistory(history)
    for (const message of acknowledgedChats) expect(history.split(`"${message}"`).length - 1).toBe(1)
    expect(statSync(join(dataDir, "sessions.json")).size).toBeGreaterThan(0)
    // Without API keys it says it serves one tenant, unauthenticated, on 127.0.0.1 only.
    expect(log()).toContain(
      "No API keys configured (CTXO_API_KEYS): serving one tenant without authentication, on 127.0.0.1 only"
    )

    // Started again on the same data root (the same start path, main.ts): no temporary file of an
    // interrupted write survives the restart, and it says how many it removed. Those are what the
    // kill left and, so that the check never passes on nothing, one of each kind planted here.
    writeFileSync(join(dataDir, "code-agent-auth", "load", ".w9-0.md.999999.0.ctxo-tmp"), "torn")
    writeFileSync(join(dataDir, ".sessions.json.999999.1700000000000.0.tmp"), "[")
    // A history journal whose last record the kill cut in the middle (planted, so the check never
    // passes on nothing): left out when read, cut off by the next record.
    const journal = join(dataDir, "notebook-physics", "messages.journal")
    appendFileSync(
      journal,
      '{"seq":999999,"sum":"0badf00d","patch":{"keep":0,"messages":[{"id":"torn-record"'
    )
    const left = walk(dataDir).filter(isTemporary).length
    const again = await startChild(dataDir)
    expect(walk(dataDir).filter(isTemporary)).toEqual([])
    expect(again.log()).toContain(
      `Removed ${left} temporary file${left === 1 ? "" : "s"} left by interrupted writes`
    )
    // The restarted gateway reads every acknowledged chat past the torn line, and records on.
    const read = await fetch(`${again.base}/api/sessions/notebook-physics/file?path=messages.json`)
    expect(read.status).toBe(200)
    const served = ((await read.json()) as { content: string }).content
    for (const message of acknowledgedChats) expect(served.split(`"${message}"`).length - 1).toBe(1)
    expect(served).not.toContain("torn-record")
    const after = await fetch(`${again.base}/api/session/notebook-physics/chat`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ message: "after the restart", model: "gpt-4o" })
    })
    expect(await after.text()).toContain("event: done")
    const journalText = readFileSync(journal, "utf8")
    expect(journalText.endsWith("\n")).toBe(true)
    expect(Either.getOrThrow(readJournal(journalText)).torn).toBe(false)
    expect(journalText).not.toContain("torn-record")
    const stopped = new Promise((r) => again.child.once("exit", r))
    again.child.kill("SIGTERM")
    await stopped
    // Stopped, it folded the journal it wrote into messages.json: every acknowledged chat, once.
    expect(existsSync(journal)).toBe(false)
    const folded = readFileSync(join(dataDir, "notebook-physics", "messages.json"), "utf8")
    decodeHistory(folded)
    for (const message of [...acknowledgedChats, "after the restart"])
      expect(folded.split(`"${message}"`).length - 1).toBe(1)
  }, 180_000)
})

describe("the gateway stopped with SIGTERM during an open chat stream", () => {
  it("closes the stream, exits, and leaves the turn resumable with its input once", async () => {
    const upstream = await startFakeUpstream()
    upstream.script({ type: "hang" })
    const dataDir = dataRoot("ctxo-term-")
    const { child, base } = await startChild(dataDir, { CTXO_UPSTREAM_BASE_URL: upstream.url })
    const response = await fetch(`${base}/api/session/notebook-physics/chat`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        message: "A question during shutdown",
        model: "gpt-4o",
        idempotencyKey: "term-1"
      })
    })
    const reader = response.body!.getReader()
    const first = new TextDecoder().decode((await reader.read()).value)
    expect(first).toContain("event: turn")
    // Wait until the gateway is waiting on the (hanging) upstream.
    while (upstream.requests.length === 0) await new Promise((r) => setTimeout(r, 20))
    const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)))
    const started = Date.now()
    child.kill("SIGTERM")
    // The stream ends (the connection closes) instead of hanging on the upstream.
    let rest = ""
    for (;;) {
      const chunk = await reader.read().catch(() => ({ done: true as const, value: undefined }))
      if (chunk.done) break
      rest += new TextDecoder().decode(chunk.value)
    }
    expect(rest).toContain('"tag":"Shutdown"')
    await exited
    expect(Date.now() - started).toBeLessThan(10_000)
    // It was waiting on the upstream, not finished.
    expect(upstream.requests).toHaveLength(1)
    await upstream.close()
    const history = historyText(dataDir, "notebook-physics")
    Schema.decodeUnknownSync(Schema.parseJson(HistoryDocument))(history)
    expect(history.split('"A question during shutdown"').length - 1).toBe(1)
  }, 180_000)
})
