import { readFileSync, utimesSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Api } from "@ctxo/api/Api"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { chatEvents, createSession, historyText, type SseEvent, startGateway } from "./harness.ts"

let gw: Awaited<ReturnType<typeof startGateway>>
beforeAll(async () => {
  gw = await startGateway({ upstreamTimeoutMs: 1_000 })
})
afterAll(() => gw.close())

const results = (events: ReadonlyArray<SseEvent>) =>
  events
    .filter((e) => e.event === "tool-result")
    .map((e) => (e.data as { result: { status: string; data?: unknown; error?: unknown } }).result)

describe("agent tools in a chat turn", () => {
  it("writes a control file only when the turn's manifest allows it (agent.writeControlFiles)", async () => {
    const manifest = (allow: boolean) =>
      `${JSON.stringify({ policy: "notebook", model: "gpt-4o", agent: { writeControlFiles: allow } })}\n`
    const outcome = async (sid: string, allow: boolean) => {
      await createSession(gw, sid)
      writeFileSync(join(gw.dataDir, sid, "context-config.json"), manifest(allow))
      gw.upstream.script(
        {
          type: "tool_calls",
          calls: [
            {
              id: "w1",
              name: "write_file",
              arguments: { path: "context-config.json", content: manifest(allow) }
            }
          ]
        },
        { type: "text", text: "Done." }
      )
      const turn = await gw.run(chatEvents(sid, { message: "Rewrite your manifest.", model: "gpt-4o" }))
      return results(turn.events)[0]
    }
    expect(await outcome("control-allowed", true)).toMatchObject({ status: "success" })
    expect(await outcome("control-refused", false)).toMatchObject({
      status: "error",
      error: { code: "PathRefused" }
    })
  })

  it("reads, writes, lists, searches, reads a block and dismisses a memory, all inside the session", async () => {
    const sid = "code-agent-auth"
    gw.upstream.script(
      {
        type: "tool_calls",
        calls: [
          {
            id: "t1",
            name: "write_file",
            arguments: {
              path: "docs/guide.md",
              content: "# Guide\n\n## Setup\nRun pnpm install.\n\n## Usage\nRun pnpm start.\n"
            }
          },
          { id: "t2", name: "list_files", arguments: { dir: "docs" } },
          { id: "t3", name: "search", arguments: { pattern: "pnpm (install|start)" } },
          { id: "t4", name: "read_block", arguments: { file: "docs/guide.md", blockId: "Guide/Usage" } },
          { id: "t5", name: "read_file", arguments: { path: "docs/guide.md", startLine: 3, endLine: 4 } },
          { id: "t6", name: "read_file", arguments: { path: "../profile.md" } }
        ]
      },
      { type: "text", text: "Done." }
    )
    const first = await gw.run(chatEvents(sid, { message: "Write and check the guide.", model: "gpt-4o" }))
    const [write, list, search, block, read, outside] = results(first.events)
    expect(write).toMatchObject({ status: "success", data: { file: "docs/guide.md", created: true } })
    expect(list).toMatchObject({ status: "success", data: { entries: [{ name: "docs/guide.md" }] } })
    expect(
      (search as { data: { matches: Array<{ file: string }> } }).data.matches.map((m) => m.file)
    ).toEqual(["docs/guide.md", "docs/guide.md"])
    expect(block).toMatchObject({
      status: "success",
      data: { block: "Guide/Usage", content: "## Usage\nRun pnpm start." }
    })
    expect(read).toMatchObject({
      status: "success",
      data: { content: "## Setup\nRun pnpm install.", startLine: 3 }
    })
    expect(outside).toMatchObject({ status: "error", error: { code: "PathRefused" } })
    expect(readFileSync(join(gw.dataDir, sid, "docs/guide.md"), "utf8")).toContain("## Usage")

    // The file changes behind the agent's back: the next read says so (seed 002 C4).
    writeFileSync(join(gw.dataDir, sid, "docs/guide.md"), "# Guide\n\nRewritten by hand.\n")
    utimesSync(join(gw.dataDir, sid, "docs/guide.md"), new Date(), new Date(Date.now() + 10_000))
    const doc = JSON.parse(historyText(gw.dataDir, sid)) as {
      messages: Array<{ id: string; role: string; parts: Array<{ callId?: string }> }>
    }
    const searchResult = doc.messages.find((m) => m.role === "tool" && m.parts[0]?.callId === "t3")!
    gw.upstream.script(
      {
        type: "tool_calls",
        calls: [
          { id: "u1", name: "read_file", arguments: { path: "docs/guide.md" } },
          {
            id: "u2",
            name: "dismiss_memory",
            arguments: { targetMessageId: searchResult.id, summary: "two pnpm lines in docs/guide.md" }
          }
        ]
      },
      { type: "text", text: "Noted." }
    )
    const second = await gw.run(chatEvents(sid, { message: "Read it again.", model: "gpt-4o" }))
    const [reread, dismissed] = results(second.events)
    expect(reread).toMatchObject({ data: { note: "Note: docs/guide.md was modified externally." } })
    expect(dismissed).toMatchObject({ status: "success" })
    // The next request shows the placeholder instead of the dismissed result.
    const last = gw.upstream.requests.at(-1)!.body.messages
    const shown = last.find((m) => m.role === "tool" && m.tool_call_id === "t3")
    expect(String(shown?.content)).toContain("two pnpm lines in docs/guide.md")
    expect(String(shown?.content)).not.toContain("matches")
  })

  it("ends a turn whose upstream hangs with an error event after the timeout", async () => {
    gw.upstream.script({ type: "hang" })
    const started = Date.now()
    const result = await gw.run(
      chatEvents("notebook-physics", { message: "Are you there?", model: "gpt-4o" })
    )
    expect(result.events.at(-1)).toMatchObject({ event: "error", data: { tag: "UpstreamError" } })
    expect(Date.now() - started).toBeLessThan(10_000)
  })

  it("compacts before a turn when the last usage reaches the trigger, and streams its progress", async () => {
    await gw.run(
      Effect.flatMap(HttpApiClient.make(Api), (c) =>
        c.sessions.create({ payload: { id: "long", concept: "compaction" } })
      )
    )
    for (let i = 0; i < 12; i++)
      await gw.run(chatEvents("long", { message: `step ${i} of the long task`, model: "gpt-4o" }))
    // The provider reports a nearly full window (gpt-4o: 128k, trigger 80%).
    gw.upstream.script({
      type: "text",
      text: "ok",
      usage: { prompt_tokens: 110_000, completion_tokens: 100 }
    })
    await gw.run(chatEvents("long", { message: "step 12 of the long task", model: "gpt-4o" }))
    const result = await gw.run(chatEvents("long", { message: "step 13 of the long task", model: "gpt-4o" }))
    const names = result.events.map((e) => e.event)
    expect(names.slice(0, 2)).toEqual(["compaction-started", "compaction-finished"])
    expect(result.events[0]!.data).toMatchObject({ keptTurns: [4, 5, 6, 7, 8, 9, 10, 11, 12, 13] })
    expect(names.at(-1)).toBe("done")
    const doc = JSON.parse(historyText(gw.dataDir, "long")) as {
      compression: Array<{ id: string }>
      messages: Array<{ meta: { turn: number; archivedBy?: string } }>
    }
    expect(doc.compression).toHaveLength(1)
    expect(doc.messages.filter((m) => m.meta.archivedBy !== undefined).map((m) => m.meta.turn)).toEqual([
      1, 1, 2, 2, 3, 3
    ])
    // The summary reaches the model as compression__context.
    expect(JSON.stringify(gw.upstream.requests.at(-1)!.body.messages)).toContain("Archived Session Summary")
  }, 60_000)
})
