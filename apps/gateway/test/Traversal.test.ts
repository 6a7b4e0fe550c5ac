/**
 * A traversal corpus through a real gateway: every path, id and manifest field a client or the
 * model can name, with `..`, absolute paths, `~`, percent- and double-encoding, NUL, backslashes,
 * long segments, unicode look-alikes, symlinks in and out (another session, sessions.json, a
 * tenant folder, a folder outside the data root, swapped during requests), another session's
 * files and reserved names. Canaries outside the data root, in another session, in a tenant
 * folder, in a dot file and in sessions.json must never appear in a response or an upstream
 * request; nothing outside what the session may touch changes; nothing answers 5xx.
 */
import { createHash, randomUUID } from "node:crypto"
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import { request } from "node:http"
import { homedir, tmpdir } from "node:os"
import { isAbsolute, join, relative, resolve, sep } from "node:path"
import type { Reply } from "@ctxo/agent/FakeUpstream"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { historyText, startGateway } from "./harness.ts"

/**
 * Each corpus test sends hundreds of requests; alone they take 2-12 s. Under CI's parallel load (every
 * package's tests and the eval at once on 2 CPUs) they were seen to take over 40 s: the timeout only
 * guards against a hang.
 */
const CORPUS_TIMEOUT = 150_000

type Gateway = Awaited<ReturnType<typeof startGateway>>

const tag = randomUUID()
const CANARY = {
  outside: `SECRET-OUTSIDE-${tag}`,
  outsideHistory: `SECRET-OUTSIDE-HISTORY-${tag}`,
  outsideManifest: `SECRET-OUTSIDE-MANIFEST-${tag}`,
  victim: `SECRET-VICTIM-${tag}`,
  victimHistory: `SECRET-VICTIM-HISTORY-${tag}`,
  victimConfig: `SECRET-VICTIM-CONFIG-${tag}`,
  index: `SECRET-INDEX-${tag}`,
  tenant: `SECRET-TENANT-${tag}`,
  hidden: `SECRET-HIDDEN-${tag}`
}
const canaries = Object.values(CANARY)
const leaked = (text: string) => canaries.filter((c) => text.includes(c))

let gw: Gateway
let outside: string
let data: string

// --- requests, sent as written (no URL normalization), every answer kept for the checks

interface Exchange {
  readonly what: string
  readonly status: number
  readonly body: string
}
const exchanges: Array<Exchange> = []

const send = (
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {}
): Promise<Exchange> =>
  new Promise((done, fail) => {
    const url = new URL(gw.baseUrl)
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body), "utf8")
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: {
          ...(payload === undefined
            ? {}
            : { "content-type": "application/json", "content-length": payload.length }),
          ...headers
        }
      },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("end", () => {
          const exchange = {
            what: `${method} ${path}${payload === undefined ? "" : ` ${payload.toString("utf8").slice(0, 300)}`}`,
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString("utf8")
          }
          exchanges.push(exchange)
          done(exchange)
        })
        res.on("error", fail)
      }
    )
    req.on("error", fail)
    req.end(payload)
  })

/** Runs `f` over `items`, `limit` at a time. */
const pool = async <A>(items: ReadonlyArray<A>, limit: number, f: (a: A) => Promise<unknown>) => {
  let next = 0
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) await f(items[next++]!)
    })
  )
}

const q = encodeURIComponent

/** The results of a chat's tool calls by call id. */
const toolResults = (text: string) =>
  new Map(
    text
      .split("\n\n")
      .filter((frame) => /^event: tool-result$/m.test(frame))
      .map((frame) => JSON.parse(/^data: (.*)$/m.exec(frame)?.[1] ?? "{}") as { id: string; result: unknown })
      .map((e) => [e.id, e.result] as const)
  )

/** Answers that are server errors: a 5xx status, or a chat's error event of one. */
const internalTags = new Set([
  "Defect",
  "StoreIOError",
  "HistoryIOError",
  "InvalidModelConfig",
  "ServerError"
])
const serverErrorsIn = (list: ReadonlyArray<Exchange>) =>
  list.filter((e) => e.status >= 500).map((e) => `${e.status} ${e.what} -> ${e.body.slice(0, 300)}`)
const internalEventsIn = (list: ReadonlyArray<Exchange>) =>
  list.flatMap((e) =>
    sseErrors(e.body)
      .filter((ev) => internalTags.has(ev.tag ?? ""))
      .map((ev) => `${e.what} -> ${ev.tag}: ${ev.message?.slice(0, 200)}`)
  )
/** The exchanges of the hijacked session's test. */
const hijacked = new Set<Exchange>()

/** The error events of a chat's Server-Sent Events. */
const sseErrors = (text: string) =>
  text
    .split("\n\n")
    .filter((frame) => /^event: error$/m.test(frame))
    .map(
      (frame) => JSON.parse(/^data: (.*)$/m.exec(frame)?.[1] ?? "{}") as { tag?: string; message?: string }
    )

// --- what the disk looks like: every entry, with a link's target and a file's hash

const snapshot = (dir: string, skip: (rel: string) => boolean = () => false) => {
  const out = new Map<string, string>()
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const full = join(d, name)
      const rel = relative(dir, full).split(sep).join("/")
      if (skip(rel)) continue
      const info = lstatSync(full)
      if (info.isSymbolicLink()) out.set(rel, `link ${readlinkSync(full)}`)
      else if (info.isDirectory()) {
        out.set(rel, "dir")
        walk(full)
      } else out.set(rel, `file ${createHash("sha256").update(readFileSync(full)).digest("hex")}`)
    }
  }
  walk(dir)
  return out
}

// --- the corpus

const longSegment = "x".repeat(256)
/** Paths a client or the model may write, relative to the session unless said otherwise. */
const paths = (): ReadonlyArray<string> => [
  "..",
  "../",
  "../x",
  "../x.md",
  "../../x",
  "../../../../../../../../etc/passwd",
  "../profile.md",
  "../sessions.json",
  "../victim/secret.md",
  "../victim/messages.json",
  "../victim/context-config.json",
  "a/../../victim/secret.md",
  "./../victim/secret.md",
  "victim/../../victim/secret.md",
  "../tenants/x/secret.md",
  "../.hidden",
  outside,
  `${outside}/secret.md`,
  `${data}/victim/secret.md`,
  `${data}/sessions.json`,
  `${data}/attacker/own.md`,
  "/etc/passwd",
  "//etc/passwd",
  "~",
  "~/x",
  "~/.bashrc",
  "~root/.bashrc",
  "%2e%2e",
  "%2e%2e%2f",
  "%2e%2e%2fvictim%2fsecret.md",
  "%2E%2E/victim/secret.md",
  "..%2fvictim%2fsecret.md",
  "..%5cvictim%5csecret.md",
  "%252e%252e%252fvictim%252fsecret.md",
  "%252e",
  "%c0%ae%c0%ae/victim/secret.md",
  "own.md\u0000",
  "own.md\u0000../../victim/secret.md",
  "\u0000",
  "..\\victim\\secret.md",
  "\\victim\\secret.md",
  "a\\..\\..\\victim\\secret.md",
  "C:\\Windows\\win.ini",
  "C:/x",
  "file:///etc/passwd",
  longSegment,
  `${longSegment}/a.md`,
  `a/${"é".repeat(128)}.md`,
  `${"a/".repeat(200)}x.md`,
  `${"abc/".repeat(1100)}x.md`,
  "．．/victim/secret.md",
  "..／victim／secret.md",
  "．．／．．／x",
  "\u2024\u2024/victim/secret.md",
  "\uff0e\uff0e/x",
  "victim/messages.json",
  "othersession/messages.json",
  "sessions.json",
  "profile.md",
  "tenants/x",
  "tenants/x/secret.md",
  "link-out.md",
  "link-abs-out.md",
  "link-outdir",
  "link-outdir/secret.md",
  "link-outdir/new.md",
  "link-victim",
  "link-victim/secret.md",
  "link-victim/messages.json",
  "link-victim/new.md",
  "link-victim-msg.json",
  "link-abs-victim.md",
  "link-index.json",
  "link-tenant/secret.md",
  "link-tenant/new.md",
  "link-hidden",
  "link-chain.md",
  "link-dangling-out.md",
  "link-global-out.md",
  "link-profile.md",
  "link-own.md",
  "own.md"
]

/** Session ids as they go in the URL (raw: `..` is sent as `..`). */
const rawIds: ReadonlyArray<string> = [
  "..",
  ".",
  "%2e%2e",
  "%2E%2E",
  "%2e",
  "..%2fvictim",
  "..%2F..%2Fvictim",
  "%252e%252e",
  "%252e%252e%252fvictim",
  "..%5cvictim",
  "%5c..%5cvictim",
  "~",
  "%7E",
  "sessions.json",
  "profile.md",
  "system-prompt.md",
  "tenants",
  "tenants%2Fx",
  "tenants%2fx",
  ".hidden",
  "victim%00",
  "victim%2F..%2Fvictim",
  "%EF%BC%8E%EF%BC%8E",
  "..%EF%BC%8Fvictim",
  "global-out.md",
  "x".repeat(300),
  "-victim",
  "_victim",
  "a.ctxo-tmp"
]
/** The same ids as a body or a header carries them. */
const decodedIds = (): ReadonlyArray<string> => [
  "..",
  ".",
  "../victim",
  "../../x",
  "%2e%2e",
  "%252e%252e",
  "..\\victim",
  "~",
  "sessions.json",
  "profile.md",
  "system-prompt.md",
  "tenants",
  "tenants/x",
  ".hidden",
  "victim\u0000",
  "．．",
  "..／victim",
  "global-out.md",
  "x".repeat(300),
  "-victim",
  "_victim",
  "a.ctxo-tmp",
  outside,
  "/etc"
]

// --- the data root: canaries, a victim session, tenant and dot files, and an attacker's links

/** Sessions the corpus runs in: what may change in the data root. */
const toolSessions = ["tools-1", "tools-2", "tools-3", "tools-4", "tools-5"]
const manifestSessions = ["m1", "m2", "m3", "m4"]
const attackers = ["attacker", ...manifestSessions, ...toolSessions]

const plantLinks = (session = "attacker") => {
  const s = join(data, session)
  const links: Record<string, string> = {
    "link-out.md": relative(s, join(outside, "secret.md")),
    "link-abs-out.md": join(outside, "secret.md"),
    "link-outdir": join(outside, "dir"),
    "link-victim": "../victim",
    "link-victim-msg.json": "../victim/messages.json",
    "link-abs-victim.md": join(data, "victim", "secret.md"),
    "link-index.json": "../sessions.json",
    "link-tenant": "../tenants/x",
    "link-hidden": "../.hidden",
    "link-chain.md": "link-out.md",
    "link-dangling-out.md": join(outside, "does-not-exist.md"),
    "link-global-out.md": "../global-out.md",
    "link-profile.md": "../profile.md",
    "link-own.md": "own.md"
  }
  for (const [name, target] of Object.entries(links)) {
    rmSync(join(s, name), { recursive: true, force: true })
    symlinkSync(target, join(s, name))
  }
  writeFileSync(join(s, "own.md"), "# Own\n\n## Block\nown text\nsecond line\n")
}

const writeManifest = (session: string, manifest: Record<string, unknown>) =>
  send("PUT", `/api/sessions/${session}/config`, manifest)

const history = (text: string) => ({
  format: "ctxo.history/v1",
  messages: [
    {
      id: "t1-0",
      role: "user",
      parts: [{ _tag: "text", text }],
      meta: { turn: 1, kind: "input", createdAt: "2026-11-01T09:05:00.000Z" }
    },
    {
      id: "t1-1",
      role: "assistant",
      parts: [{ _tag: "text", text }],
      meta: { turn: 1, step: 1, createdAt: "2026-11-01T09:05:01.000Z" }
    }
  ]
})

let upstreamFrom = 0
let dataBefore: Map<string, string>
let outsideBefore: Map<string, string>
/** Places outside the data root a path of the corpus could name, and whether each existed. */
let candidatesBefore: Map<string, boolean>
/** What may change during the corpus: the attacker's and the hijacked session's folders. */
const mayChange = (rel: string) =>
  [...attackers, "hijack"].some((session) => rel === session || rel.startsWith(`${session}/`))

const candidates = () => {
  const out = new Set<string>()
  for (const p of [...paths(), ...decodedIds()]) {
    if (p.includes("\u0000")) continue
    const variants = [p, p.replaceAll("\\", "/"), p.replace(/^~(?=\/|$)/, homedir())]
    for (const v of variants)
      for (const base of [join(data, "attacker"), data, join(data, "tenants", "x")]) {
        const at = isAbsolute(v) ? resolve(v) : resolve(base, v)
        if (
          at !== data &&
          !at.startsWith(`${data}${sep}`) &&
          !at.startsWith(`${outside}${sep}`) &&
          at !== outside
        )
          out.add(at)
      }
  }
  return out
}

beforeAll(async () => {
  gw = await startGateway({ upstreamTimeoutMs: 5_000, maxSteps: 4 })
  data = gw.dataDir
  outside = mkdtempSync(join(tmpdir(), "ctxo-traversal-outside-"))
  mkdirSync(join(outside, "dir"))
  writeFileSync(join(outside, "secret.md"), `# Secret\n${CANARY.outside}\n\n## Block\n${CANARY.outside}\n`)
  writeFileSync(join(outside, "dir", "secret.md"), `# Secret\n${CANARY.outside}\n`)
  writeFileSync(join(outside, "history.json"), JSON.stringify(history(CANARY.outsideHistory)))
  writeFileSync(
    join(outside, "manifest.json"),
    JSON.stringify({ sources: { leak__context: CANARY.outsideManifest } })
  )
  mkdirSync(join(outside, "tool-results"))

  // Another session, with its files, history and manifest holding canaries.
  expect((await send("POST", "/api/sessions", { id: "victim", concept: CANARY.index })).status).toBe(201)
  await send("PUT", `/api/sessions/victim/file?path=secret.md`, {
    content: `# Secret\n${CANARY.victim}\n\n## Block\n${CANARY.victim}\n`
  })
  await writeManifest("victim", { sources: { leak__context: CANARY.victimConfig } })
  const chat = await send("POST", "/api/session/victim/chat", { message: `remember ${CANARY.victimHistory}` })
  expect(chat.body).toContain("event: done")
  expect(historyText(data, "victim")).toContain(CANARY.victimHistory)
  // A tenant folder and a dot file in the data root; global files that are links out of it.
  mkdirSync(join(data, "tenants", "x"), { recursive: true })
  writeFileSync(join(data, "tenants", "x", "secret.md"), `# Secret\n${CANARY.tenant}\n`)
  writeFileSync(join(data, "tenants", "x", "sessions.json"), JSON.stringify([{ id: CANARY.tenant }]))
  writeFileSync(join(data, ".hidden"), `${CANARY.hidden}\n`)
  symlinkSync(join(outside, "secret.md"), join(data, "global-out.md"))
  symlinkSync("victim/secret.md", join(data, "global-victim.md"))
  symlinkSync("tenants/x/secret.md", join(data, "global-tenant.md"))
  symlinkSync("sessions.json", join(data, "global-index.md"))
  symlinkSync(".hidden", join(data, "global-hidden.md"))

  // The attackers' sessions (alike, so phases can run side by side), with links in and out.
  for (const session of attackers) {
    expect((await send("POST", "/api/sessions", { id: session, concept: "an attacker" })).status).toBe(201)
    plantLinks(session)
  }

  // A session whose control files are links out: history, tool results and manifest.
  expect((await send("POST", "/api/sessions", { id: "hijack", concept: "hijacked" })).status).toBe(201)
  writeFileSync(join(data, "hijack", "own.md"), "# Own\n")
  symlinkSync(join(outside, "history.json"), join(data, "hijack", "messages.json"))
  symlinkSync(join(outside, "tool-results"), join(data, "hijack", "tool-results"))
  symlinkSync(join(outside, "manifest.json"), join(data, "hijack", "context-config.json"))

  // The canaries are seen where they may be read (the checks below would see a leak).
  expect(leaked((await send("GET", "/api/sessions/victim/file?path=secret.md")).body)).toEqual([
    CANARY.victim
  ])
  upstreamFrom = gw.upstream.requests.length
  exchanges.length = 0
  dataBefore = snapshot(data, (rel) => mayChange(rel) || rel === "sessions.json")
  outsideBefore = snapshot(outside)
  candidatesBefore = new Map([...candidates()].map((c) => [c, existsSync(c)]))
}, 60_000)

afterAll(async () => {
  await gw?.close()
  rmSync(outside, { recursive: true, force: true })
})

describe("the traversal corpus", () => {
  it(
    "files API: read, write, delete, list and blocks of the session",
    async () => {
      plantLinks()
      await pool(paths(), 8, async (p) => {
        await send("GET", `/api/sessions/attacker/file?path=${q(p)}`)
        await send("GET", `/api/sessions/attacker/file?path=${q(p)}&startLine=1&endLine=2`)
        await send("GET", `/api/sessions/attacker/blocks?path=${q(p)}`)
      })
      const list = await send("GET", "/api/sessions/attacker/files")
      expect(list.status).toBe(200)
      const listed = (JSON.parse(list.body) as Array<{ path: string }>).map((f) => f.path)
      // Links are listed when they lead where the session may read, never out.
      expect(listed).toEqual(expect.arrayContaining(["own.md", "link-own.md", "link-profile.md"]))
      for (const out of [
        "link-out.md",
        "link-abs-out.md",
        "link-victim-msg.json",
        "link-index.json",
        "link-chain.md"
      ])
        expect(listed).not.toContain(out)
      expect(listed.some((p) => p.startsWith("link-victim/") || p.startsWith("link-outdir/"))).toBe(false)
      // A link in is followed: a global file and the session's own file.
      const profile = await send("GET", "/api/sessions/attacker/file?path=link-profile.md")
      expect(profile.status).toBe(200)
      expect(JSON.parse(profile.body).content).toBe(readFileSync(join(data, "profile.md"), "utf8"))
      for (const p of ["link-out.md", "link-victim/secret.md", "link-index.json", "../victim/secret.md"])
        expect((await send("GET", `/api/sessions/attacker/file?path=${q(p)}`)).status).toBe(400)

      await pool(paths(), 8, async (p) => {
        await send("PUT", `/api/sessions/attacker/file?path=${q(p)}`, {
          content: `written to ${p.slice(0, 40)}\n`
        })
      })
      plantLinks()
      await pool(paths(), 8, async (p) => {
        await send("DELETE", `/api/sessions/attacker/file?path=${q(p)}`)
      })
      plantLinks()
    },
    CORPUS_TIMEOUT
  )

  it(
    "session ids: every endpoint that takes one",
    async () => {
      await pool(rawIds, 4, async (id) => {
        await send("GET", `/api/sessions/${id}`)
        await send("GET", `/api/sessions/${id}/files`)
        await send("GET", `/api/sessions/${id}/file?path=secret.md`)
        await send("GET", `/api/sessions/${id}/file?path=messages.json`)
        await send("GET", `/api/sessions/${id}/file?path=x%2Fsecret.md`)
        await send("GET", `/api/sessions/${id}/blocks?path=secret.md`)
        await send("PUT", `/api/sessions/${id}/file?path=pwned.md`, { content: "pwned\n" })
        await send("DELETE", `/api/sessions/${id}/file?path=secret.md`)
        await send("GET", `/api/sessions/${id}/config`)
        await send("PUT", `/api/sessions/${id}/config`, { policy: "notebook" })
        await send("GET", `/api/session/${id}/context-preview`)
        await send("GET", `/api/sessions/${id}/recording`)
        await send("POST", `/api/session/${id}/chat`, { message: "hello" })
        await send("DELETE", `/api/sessions/${id}`)
      })
      await pool(decodedIds(), 4, async (id) => {
        const created = await send("POST", "/api/sessions", { id, concept: "reserved" })
        expect(created.status, `create ${JSON.stringify(id)}`).toBeGreaterThanOrEqual(400)
        expect(created.status, `create ${JSON.stringify(id)}`).toBeLessThan(500)
        const message = { model: "gpt-4o", messages: [{ role: "user", content: "hello" }] }
        await send("POST", "/v1/chat/completions", message, { "x-ctxo-session": encodeURIComponent(id) })
        await send("POST", "/v1/chat/completions", { ...message, metadata: { session_id: id } })
      })
      // Reserved names are refused with 400.
      for (const id of ["sessions.json", "profile.md", "tenants"])
        expect((await send("POST", "/api/sessions", { id, concept: "reserved" })).status).toBe(400)
    },
    CORPUS_TIMEOUT
  )

  it(
    "context-preview queries and chat references name only what the session may read",
    async () => {
      plantLinks()
      await writeManifest("attacker", { policy: "notebook" })
      await pool(paths(), 6, async (p) => {
        await send("GET", `/api/session/attacker/context-preview?query=${q(`[${p}:1:2]`)}`)
        await send("GET", `/api/session/attacker/context-preview?query=${q(`[${p}#Block]`)}`)
        await send("GET", `/api/session/attacker/context-preview?query=${q(`explain @${p}`)}`)
      })
      // Chats run one at a time per session: four sessions (alike) take the corpus side by side.
      let next = 0
      await Promise.all(
        manifestSessions.map(async (session) => {
          while (next < paths().length) {
            const p = paths()[next++]!
            const chat = await send("POST", `/api/session/${session}/chat`, {
              message: "look",
              references: [
                p,
                `[${p}:1:2]`,
                { path: p, startLine: 1, endLine: 2 },
                { path: p, block: "Block" }
              ]
            })
            expect(chat.status, chat.what).toBeLessThan(500)
          }
        })
      )
      // A reference that leads in is read.
      const inside = await send(
        "GET",
        `/api/session/attacker/context-preview?query=${q("[link-profile.md:1:2]")}`
      )
      expect(inside.status).toBe(200)
    },
    CORPUS_TIMEOUT
  )

  it(
    "the model's tools: read_file, write_file, list_files, search and read_block",
    async () => {
      const control = [
        "context-config.json",
        "messages.json",
        "tool-results/x.json",
        "tool-results",
        "./context-config.json"
      ]
      const calls: Record<string, (p: string) => unknown> = {
        read_file: (p) => ({ path: p }),
        write_file: (p) => ({ path: p, content: `model wrote ${p.slice(0, 40)}\n` }),
        list_files: (p) => ({ dir: p }),
        search: (p) => ({ pattern: "SECRET", path: p }),
        read_block: (p) => ({ file: p, blockId: "Block" })
      }
      // The five turns run side by side, one session each; a turn runs whichever scripted list of
      // calls its first request takes (the sessions are alike), then the local model's answer.
      const corpora = Object.entries(calls).map(([name, args]) => {
        const corpus = name === "write_file" ? [...paths(), ...control] : paths()
        return {
          name,
          corpus,
          calls: corpus.map((p, i) => ({ id: `${name}-${i}`, name, arguments: args(p) }))
        }
      })
      gw.upstream.script(...corpora.map((c): Reply => ({ type: "tool_calls", calls: c.calls })))
      const turns = await Promise.all(
        toolSessions.map((session) =>
          send("POST", `/api/session/${session}/chat`, { message: "use the tools" })
        )
      )
      const results = new Map<string, unknown>()
      for (const turn of turns) {
        expect(turn.status).toBe(200)
        expect(turn.body).toContain("event: done")
        for (const [id, result] of toolResults(turn.body)) results.set(id, result)
      }
      expect(results.size).toBe(corpora.reduce((n, c) => n + c.calls.length, 0))
      // The session's control files are not the model's to write (no agent.writeControlFiles).
      for (const file of control)
        expect(results.get(`write_file-${paths().length + control.indexOf(file)}`), file).toMatchObject({
          status: "error",
          error: { code: "PathRefused" }
        })
      // A link that leads in is read.
      expect(results.get(`read_file-${paths().indexOf("link-profile.md")}`)).toMatchObject({
        status: "success"
      })
      for (const session of toolSessions) plantLinks(session)
      // One search over everything: only the session's own files (and the globals it links to).
      gw.upstream.script(
        {
          type: "tool_calls",
          calls: [{ id: "all", name: "search", arguments: { pattern: "SECRET|own text" } }]
        },
        { type: "text", text: "done" }
      )
      const all = await send("POST", "/api/session/tools-1/chat", { message: "search all" })
      expect(all.body).toContain("own text")
      // The control files stayed the gateway's.
      for (const session of toolSessions) {
        expect(existsSync(join(data, session, "context-config.json"))).toBe(false)
        expect(existsSync(join(data, session, "tool-results", "x.json"))).toBe(false)
      }
    },
    CORPUS_TIMEOUT
  )

  it(
    "every manifest field that names a file",
    async () => {
      plantLinks()
      const fields: Record<string, (p: string) => Record<string, unknown>> = {
        systemPromptGlobal: (p) => ({ systemPrompt: [{ type: "global", file: p }] }),
        systemPromptSession: (p) => ({ systemPrompt: [{ type: "session", file: p }] }),
        profile: (p) => ({ profile: p, profileBlocks: ["Block"] }),
        profileBlocks: (p) => ({ profile: "profile.md", profileBlocks: [p, `${p}/Block`] }),
        referencesInline: (p) => ({ references: [`[${p}:1:2]`, `[${p}#Block]`] }),
        referencesLines: (p) => ({ references: [{ path: p, startLine: 1, endLine: 2 }] }),
        referencesBlock: (p) => ({ references: [{ path: p, block: "Block" }] }),
        knowledge: (p) => ({
          knowledge: [{ path: p }, { path: p, block: "Block" }],
          process: { knowledge: true }
        }),
        knowledgeGlob: (p) => ({
          knowledge: [{ path: `${p}/*` }, { path: `${p}/**` }],
          process: { knowledge: true }
        }),
        todo: (p) => ({ todo: p }),
        tree: (p) => ({ tree: { file: p, node: "n1" } }),
        sources: (p) => ({ sources: { leak__context: { file: p } } }),
        chatHistory: (p) => ({ chatHistory: { source: p } })
      }
      const manifests = Object.entries(fields).flatMap(([field, of]) =>
        paths().map((p) => ({ field, p, manifest: { policy: "notebook", ...of(p) } }))
      )
      // Four sessions compile side by side (each its own manifest).
      let i = 0
      const previews = new Map<string, number>()
      await Promise.all(
        manifestSessions.map(async (w) => {
          while (i < manifests.length) {
            const { field, p, manifest } = manifests[i++]!
            const put = await send("PUT", `/api/sessions/${w}/config`, manifest)
            expect(put.status, put.what).toBe(200)
            previews.set(`${field} ${p}`, (await send("GET", `/api/session/${w}/context-preview`)).status)
            if ("systemPrompt" in manifest) await send("GET", `/api/sessions/${w}/recording`)
          }
        })
      )
      // What the session may read resolves (the corpus is not refused wholesale).
      for (const key of [
        "systemPromptSession own.md",
        "referencesLines own.md",
        "referencesBlock link-own.md",
        "sources link-profile.md",
        "systemPromptGlobal profile.md"
      ])
        expect(previews.get(key), key).toBe(200)
      // Global system prompts name files at the top of the root only, links out of it refused.
      for (const file of [
        "global-out.md",
        "global-victim.md",
        "global-tenant.md",
        "global-index.md",
        "global-hidden.md"
      ]) {
        await writeManifest("attacker", { systemPrompt: [{ type: "global", file }] })
        const preview = await send("GET", "/api/session/attacker/context-preview")
        expect(preview.status, file).toBe(422)
      }
      await writeManifest("attacker", { systemPrompt: [{ type: "global", file: "system-prompt.md" }] })
      expect((await send("GET", "/api/session/attacker/context-preview")).status).toBe(200)
    },
    CORPUS_TIMEOUT
  )

  it(
    "a session whose manifest, history and tool results are links out of the data root",
    async () => {
      const from = exchanges.length
      const s = "hijack"
      const v1 = { model: "gpt-4o", messages: [{ role: "user", content: "hello" }] }
      const everything = async () => {
        await send("GET", `/api/sessions/${s}/config`)
        await send("GET", `/api/session/${s}/context-preview`)
        await send("GET", `/api/sessions/${s}/recording`)
        await send("GET", `/api/sessions/${s}/files`)
        for (const file of ["messages.json", "context-config.json", "tool-results/x.json"]) {
          await send("GET", `/api/sessions/${s}/file?path=${q(file)}`)
          await send("GET", `/api/sessions/${s}/blocks?path=${q(file)}`)
          await send("PUT", `/api/sessions/${s}/file?path=${q(file)}`, { content: "{}" })
        }
      }
      // The manifest leads out: refused everywhere, before anything reaches the model.
      await everything()
      const before = gw.upstream.requests.length
      await send("POST", `/api/session/${s}/chat`, { message: "hello" })
      await send("POST", "/v1/chat/completions", v1, { "x-ctxo-session": s })
      expect(gw.upstream.requests.length).toBe(before)
      // The history leads out.
      rmSync(join(data, s, "context-config.json"))
      await everything()
      await send("POST", `/api/session/${s}/chat`, { message: "hello" })
      await send("POST", "/v1/chat/completions", v1, { "x-ctxo-session": s })
      await send("POST", "/v1/chat/completions", { ...v1, stream: true }, { "x-ctxo-session": s })
      expect(gw.upstream.requests.length).toBe(before)
      // The tool results lead out: a long result is kept nowhere outside.
      rmSync(join(data, s, "messages.json"))
      writeFileSync(join(data, s, "big.md"), `# Big\n${"a line of the hijacked session\n".repeat(4000)}`)
      gw.upstream.script(
        { type: "tool_calls", calls: [{ id: "big", name: "read_file", arguments: { path: "big.md" } }] },
        { type: "text", text: "done" }
      )
      const turn = await send("POST", `/api/session/${s}/chat`, { message: "read the big file" })
      expect(turn.body).toContain('"tool-call"')
      await everything()
      expect(readdirSync(join(outside, "tool-results"))).toEqual([])
      // Refused, named, and never a server error.
      for (const e of exchanges.slice(from)) hijacked.add(e)
      expect.soft(serverErrorsIn([...hijacked])).toEqual([])
      expect.soft(internalEventsIn([...hijacked])).toEqual([])
    },
    CORPUS_TIMEOUT
  )
  it(
    "/v1/compile takes files and a manifest in the body and never reads the disk",
    async () => {
      const fields: ReadonlyArray<(p: string) => Record<string, unknown>> = [
        (p) => ({
          systemPrompt: [
            { type: "global", file: p },
            { type: "session", file: p }
          ]
        }),
        (p) => ({ profile: p, profileBlocks: ["Block"] }),
        (p) => ({
          references: [`[${p}:1:2]`, { path: p, startLine: 1, endLine: 1 }, { path: p, block: "Block" }]
        }),
        (p) => ({ knowledge: [{ path: p }, { path: `${p}/*` }], process: { knowledge: true } }),
        (p) => ({ todo: p }),
        (p) => ({ tree: { file: p, node: "n1" } }),
        (p) => ({ sources: { leak__context: { file: p } } }),
        (p) => ({ chatHistory: { source: p } })
      ]
      const bodies = paths().flatMap((p) =>
        fields.map((of) => ({
          manifest: of(p),
          files: { [p]: "# File\n\n## Block\nfrom the body\n", "own.md": "# Own\n" },
          globalFiles: { [p]: "# Global\n", "profile.md": "# Profile\n\n## Block\nx\n" },
          query: `[${p}:1:1]`
        }))
      )
      await pool(bodies, 8, (body) => send("POST", "/v1/compile", body))
    },
    CORPUS_TIMEOUT
  )

  it(
    "symlinks swapped during requests never lead a read or a write out",
    async () => {
      const s = join(data, "attacker")
      writeFileSync(join(s, "race-in.md"), "# In\nrace inside\n")
      mkdirSync(join(s, "race-dir-in"), { recursive: true })
      let stop = false
      const swapper = (async () => {
        // A link put in place atomically (rename over the old one); a write may have made the
        // name a directory meanwhile (it is the session's own then), which goes first.
        const swap = (name: string, target: string) => {
          const temp = join(s, `.swap-${name}`)
          rmSync(temp, { force: true })
          symlinkSync(target, temp)
          try {
            renameSync(temp, join(s, name))
          } catch {
            rmSync(join(s, name), { recursive: true, force: true })
            rmSync(temp, { force: true })
          }
        }
        for (let n = 0; !stop; n++) {
          swap("race.md", n % 2 === 0 ? "race-in.md" : join(outside, "secret.md"))
          swap("race-dir", n % 2 === 0 ? "race-dir-in" : join(outside, "dir"))
          await new Promise((r) => setImmediate(r))
        }
      })()
      const rounds = Array.from({ length: 150 }, (_, n) => n)
      await pool(rounds, 6, async (n) => {
        await send("GET", "/api/sessions/attacker/file?path=race.md")
        await send("PUT", `/api/sessions/attacker/file?path=race-dir%2Fw${n % 7}.md`, { content: "raced\n" })
        await send("GET", "/api/sessions/attacker/file?path=race-dir%2Fsecret.md")
      })
      stop = true
      await swapper
    },
    CORPUS_TIMEOUT
  )

  it("read and wrote nothing outside what the session may touch, and never answered 5xx", () => {
    expect(exchanges.length).toBeGreaterThan(2000)
    // No 5xx, and no error event of a chat that is one (the hijacked session checks its own).
    const rest = exchanges.filter((e) => !hijacked.has(e))
    expect.soft(serverErrorsIn(rest)).toEqual([])
    expect.soft(internalEventsIn(rest)).toEqual([])
    // No canary in any answer or in anything sent upstream.
    const leaks = exchanges.flatMap((e) => leaked(e.body).map((c) => `${c} in the answer to ${e.what}`))
    expect.soft(leaks).toEqual([])
    const upstream = gw.upstream.requests
      .slice(upstreamFrom)
      .flatMap((r, i) => leaked(JSON.stringify(r.body)).map((c) => `${c} in upstream request ${i}`))
    expect.soft(upstream).toEqual([])
    expect(gw.upstream.requests.length - upstreamFrom).toBeGreaterThan(10)
    // No error shows where the data root is unless the request itself named it.
    const named = (e: Exchange) => {
      try {
        return decodeURIComponent(e.what).includes(data)
      } catch {
        return e.what.includes(data)
      }
    }
    const shown = exchanges
      .filter((e) => !named(e))
      .filter(
        (e) =>
          (e.status >= 400 && e.body.includes(data)) ||
          sseErrors(e.body).some((ev) => ev.message?.includes(data) === true)
      )
      .map((e) => `${e.what} -> ${e.body.slice(0, 300)}`)
    expect.soft(shown).toEqual([])
    // Nothing changed in the data root but the attacker's and the hijacked session's folders
    // (the other workers of the manifest corpus are new sessions), nothing outside it.
    const now = snapshot(data, (rel) => mayChange(rel) || rel === "sessions.json")
    expect.soft(Object.fromEntries(now)).toEqual(Object.fromEntries(dataBefore))
    const index = JSON.parse(readFileSync(join(data, "sessions.json"), "utf8")) as Array<{ id: string }>
    expect(index.map((r) => r.id).sort()).toEqual(
      [...attackers, "code-agent-auth", "hijack", "notebook-physics", "victim"].sort()
    )
    expect.soft(Object.fromEntries(snapshot(outside))).toEqual(Object.fromEntries(outsideBefore))
    const appeared = [...candidatesBefore]
      .filter(([at, existed]) => !existed && existsSync(at))
      .map(([at]) => at)
    expect.soft(appeared).toEqual([])
    // Writes inside the session did land (the corpus was not refused wholesale).
    expect(
      toolSessions.some((session) => existsSync(join(data, session, "．．", "victim", "secret.md")))
    ).toBe(true)
  })
})
