/**
 * The agent's tools on demand through the SSE chat: the always-on tools go with every request,
 * read_block only when the input is about a block of a file; the preview shows what would go.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { chatEvents, createSession, startGateway } from "./harness.ts"

let gw: Awaited<ReturnType<typeof startGateway>>
beforeAll(async () => {
  gw = await startGateway()
})
afterAll(() => gw.close())

const toolNames = (body: { tools?: unknown }) =>
  ((body.tools ?? []) as ReadonlyArray<{ function: { name: string } }>).map((t) => t.function.name)

describe("the agent's tools load on demand", () => {
  it("offers read_block only to an input about a section of a file, and counts what it sends", async () => {
    await createSession(gw, "tools-on-demand")
    const before = gw.upstream.requests.length
    await gw.run(chatEvents("tools-on-demand", { message: "good morning" }))
    await gw.run(
      chatEvents("tools-on-demand", { message: "Read the Usage section under the Guide heading of guide.md" })
    )
    const [plain, about] = gw.upstream.requests.slice(before)
    expect(toolNames(plain!.body)).not.toContain("read_block")
    expect(toolNames(about!.body)).toContain("read_block")
    const preview = await fetch(
      `${gw.baseUrl}/api/sessions/tools-on-demand/context-preview?query=${encodeURIComponent("show the Setup heading block of README.md")}`
    )
    const json = (await preview.json()) as {
      request: { tools?: ReadonlyArray<{ function: { name: string } }> }
      report: { sources: ReadonlyArray<{ id: string; used: number }> }
    }
    expect(toolNames(json.request)).toContain("read_block")
    expect(json.report.sources.find((s) => s.id === "tools")?.used).toBeGreaterThan(0)
  })
})

describe("the deployment's default shares (CTXO_BUDGET_SHARES)", () => {
  it("applies to every session's compile, and a session's own budget.shares win", async () => {
    const off = await startGateway({ budgetShares: { tools: 0 } })
    try {
      await createSession(off, "shares")
      const preview = async () =>
        (await (
          await fetch(
            `${off.baseUrl}/api/sessions/shares/context-preview?query=${encodeURIComponent("hello")}`
          )
        ).json()) as {
          request: { tools?: ReadonlyArray<{ function: { name: string } }> }
          report: { sources: ReadonlyArray<{ id: string; share: number; why?: ReadonlyArray<string> }> }
        }
      const switchedOff = await preview()
      expect(toolNames(switchedOff.request)).toEqual([])
      expect(switchedOff.report.sources.find((s) => s.id === "tools")?.share).toBe(0)
      const put = await fetch(`${off.baseUrl}/api/sessions/shares/config`, {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ budget: { shares: { tools: 0.15 } } })
      })
      expect(put.status).toBe(200)
      expect(toolNames((await preview()).request)).toContain("read_file")
    } finally {
      await off.close()
    }
  })
})
