/**
 * The workbench in a real browser (Chromium through playwright-core) against a gateway started as
 * `pnpm start` starts it, on the example data with its local model: create a session by keyboard,
 * tick two blocks and watch the preview change (and a conflicting write refused), chat with a
 * reference taken from the autocomplete and watch it stream, pin a turn, see a compaction, read
 * the context with its diff; every view at 1280x800 and 390x844 as screenshots (in
 * `.reports/screenshots/`), none wider than the screen; no console errors; an API key entered in
 * the page when the gateway has keys.
 */
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import type { Browser, Locator, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { launch } from "./browser.ts"
import { type Gateway, startGateway } from "./gateway.ts"

const screenshots = fileURLToPath(new URL("../.reports/screenshots", import.meta.url))

/** A session of 12 finished turns whose provider reported a nearly full window: the next turn compacts. */
const longTask = (dataDir: string) => {
  const sessions = JSON.parse(readFileSync(join(dataDir, "sessions.json"), "utf8")) as Array<unknown>
  sessions.push({ id: "long-task", concept: "A long task", createdAt: "2026-11-03T08:00:00.000Z" })
  writeFileSync(join(dataDir, "sessions.json"), JSON.stringify(sessions, null, 2))
  mkdirSync(join(dataDir, "long-task"))
  const messages = Array.from({ length: 12 }, (_, i) => i + 1).flatMap((turn) => [
    {
      id: `t${turn}-0`,
      role: "user",
      parts: [{ _tag: "text", text: `Step ${turn} of the long task.` }],
      meta: { turn, kind: "input" }
    },
    {
      id: `t${turn}-1`,
      role: "assistant",
      parts: [{ _tag: "text", text: `Done with step ${turn}.` }],
      meta: {
        turn,
        step: 1,
        kind: "final",
        finished: true,
        ...(turn === 12 ? { usage: { inputTokens: 110_000, outputTokens: 100 } } : {})
      }
    }
  ])
  writeFileSync(
    join(dataDir, "long-task", "messages.json"),
    JSON.stringify({ format: "ctxo.history/v1", messages, compression: [] })
  )
}

let gw: Gateway
let browser: Browser
const consoleErrors: Array<string> = []

const open = async (path: string, viewport = { width: 1280, height: 800 }): Promise<Page> => {
  const page = await browser.newPage({ viewport })
  page.on("console", (m) => {
    if (m.type() === "error") consoleErrors.push(`${path}: ${m.text()}`)
  })
  page.on("pageerror", (e) => consoleErrors.push(`${path}: ${e.message}`))
  await page.goto(`${gw.baseUrl}${path}`)
  return page
}

/** Presses Tab until `target` has the focus (at most 60 times): reachable by keyboard. */
const tabTo = async (page: Page, target: string) => {
  for (let i = 0; i < 60; i++) {
    await page.keyboard.press("Tab")
    if (
      await page
        .locator(target)
        .evaluate((el) => el === document.activeElement)
        .catch(() => false)
    )
      return
  }
  throw new Error(`${target} is not reachable with Tab`)
}

const configOf = (session: string) =>
  JSON.parse(readFileSync(join(gw.dataDir, session, "context-config.json"), "utf8")) as Record<
    string,
    unknown
  >

/** The text of an element, as a person reads it (no text is "", not null). */
const text = async (locator: Locator) => (await locator.textContent()) ?? ""

const layerTokens = async (page: Page, layer: string) => {
  const row = page.locator(`[data-testid=live-preview] tr[data-layer="${layer}"] td`).nth(1)
  return (await row.count()) === 0 ? 0 : Number((await text(row)).replace(/,/g, ""))
}

beforeAll(async () => {
  rmSync(screenshots, { recursive: true, force: true })
  mkdirSync(screenshots, { recursive: true })
  gw = await startGateway({
    prepare: longTask,
    // A small window, so a request has to leave something out.
    env: {
      CTXO_MODELS: JSON.stringify({
        models: {
          "test/small": {
            contextWindow: 1000,
            maxOutput: 100,
            tokenizer: { kind: "exact", encoding: "o200k_base" }
          }
        }
      })
    }
  })
  browser = await launch()
})
afterAll(async () => {
  await browser?.close()
  await gw?.stop()
})

describe("the workbench", () => {
  it("creates a session by keyboard alone and lists it with its state", async () => {
    const page = await open("/")
    await page.getByRole("table", { name: "Sessions" }).waitFor()
    await tabTo(page, "input >> nth=0")
    await page.keyboard.type("wb-test")
    await page.keyboard.press("Tab")
    await page.keyboard.type("Workbench test")
    await page.keyboard.press("Enter")
    await page.waitForURL(`${gw.baseUrl}/sessions/wb-test/chat`)
    await page.getByRole("link", { name: "Sessions" }).first().click()
    const row = page.locator("tr[data-session=wb-test]")
    expect(await text(row)).toContain("Workbench test")
    expect(await text(row)).toMatch(/active/i)
    // Pause it and see the state change, then resume.
    await row.getByRole("button", { name: "Pause wb-test" }).click()
    await row.getByText("paused").waitFor()
    await row.getByRole("button", { name: "Resume wb-test" }).click()
    await row.getByText("active").waitFor()
    await page.close()
  })

  it("sends one task to several sessions and shows each session's task", async () => {
    const page = await open("/")
    const form = page.getByRole("form", { name: "Distribute a task" })
    await form.getByRole("textbox", { name: "Task", exact: true }).fill("Check the units")
    await form.getByRole("checkbox", { name: "wb-test" }).check()
    await form.getByRole("checkbox", { name: "code-agent-auth" }).check()
    await form.getByRole("button", { name: "Distribute" }).click()
    const results = page.getByRole("status", { name: "Distribution results" })
    await results.waitFor()
    expect(await text(results)).toMatch(/wb-test: task t-[\w-]+ added/)
    expect(await text(results)).toMatch(/code-agent-auth: task t-[\w-]+ added/)
    await page.close()
    const overview = await open("/sessions/wb-test")
    await overview.getByRole("table", { name: "Tasks" }).waitFor()
    expect(await text(overview.getByRole("table", { name: "Tasks" }))).toContain("Check the units")
    await overview.close()
  })

  it("shows a refused turn and sends it again with the same idempotency key", async () => {
    const post = (path: string) => fetch(`${gw.baseUrl}${path}`, { method: "POST" })
    expect((await post("/api/sessions/wb-test/pause")).status).toBe(200)
    const page = await open("/sessions/wb-test/chat")
    const box = page.getByRole("combobox", { name: "Message" })
    await box.fill("Are you there?")
    await box.press("Control+Enter")
    const error = page.getByTestId("chat-error")
    await error.waitFor()
    expect(await text(error)).toContain("SessionNotActive: Session wb-test is paused")
    expect(await text(error)).toMatch(/key ui-[\w-]+/)
    // The browser logs the refusal (409) as a console error: the one this test provoked.
    const provoked = consoleErrors.findIndex(
      (e) => e.startsWith("/sessions/wb-test/chat:") && e.includes("status of 409")
    )
    expect(provoked).toBeGreaterThanOrEqual(0)
    consoleErrors.splice(provoked, 1)
    expect((await post("/api/sessions/wb-test/resume")).status).toBe(200)
    await error.getByRole("button", { name: "Retry with the same idempotency key" }).click()
    await expect
      .poll(() => text(page.getByTestId("stream-stats")), { timeout: 20_000 })
      .toMatch(/^Turn 1: .* done/)
    expect(await page.getByTestId("chat-error").count()).toBe(0)
    const history = (await (await fetch(`${gw.baseUrl}/api/sessions/wb-test/history`)).json()) as {
      turns: Array<{ messages: Array<{ kind?: string; parts: Array<{ text?: string }> }> }>
    }
    const inputs = history.turns.flatMap((t) => t.messages).filter((m) => m.kind === "input")
    expect(inputs.map((m) => m.parts[0]?.text)).toEqual(["Are you there?"])
    await page.close()
  })

  it("ticks two profile blocks: context-config.json gets them and the live preview grows", async () => {
    const page = await open("/sessions/wb-test/blocks")
    await page
      .locator(
        "[data-testid=live-preview] tr[data-layer=query], [data-testid=live-preview] tr[data-layer=system_prompt]"
      )
      .first()
      .waitFor()
    expect(await layerTokens(page, "profile__context")).toBe(0)
    const first = page.getByRole("checkbox", { name: "Profile block: 学习目标", exact: true })
    await first.focus()
    await page.keyboard.press("Space")
    await expect.poll(() => layerTokens(page, "profile__context")).toBeGreaterThan(0)
    const one = await layerTokens(page, "profile__context")
    await page.getByRole("checkbox", { name: "Profile block: 已有基础", exact: true }).check()
    await expect.poll(() => layerTokens(page, "profile__context")).toBeGreaterThan(one)
    expect(configOf("wb-test").profileBlocks).toEqual(["学习目标", "已有基础"])

    // Someone else writes the file: the next tick is refused and shown, the file stays theirs.
    const theirs = `${JSON.stringify({ profileBlocks: ["基本信息"] }, null, 2)}\n`
    writeFileSync(join(gw.dataDir, "wb-test", "context-config.json"), theirs)
    const third = page.getByRole("checkbox", { name: "Profile block: 基本信息/教育背景", exact: true })
    await third.click()
    await page.getByTestId("conflict").waitFor()
    expect(await third.isChecked()).toBe(false)
    // The browser logs the refused write (409) as a console error: the one this test provoked.
    const provoked = consoleErrors.findIndex(
      (e) => e.startsWith("/sessions/wb-test/blocks:") && e.includes("status of 409")
    )
    expect(provoked).toBeGreaterThanOrEqual(0)
    consoleErrors.splice(provoked, 1)
    expect(await text(page.getByTestId("conflict"))).toContain("changed since this page read it")
    expect(readFileSync(join(gw.dataDir, "wb-test", "context-config.json"), "utf8")).toBe(theirs)
    await page.getByRole("button", { name: "Reload context-config.json" }).click()
    await expect
      .poll(() => page.getByRole("checkbox", { name: "Profile block: 基本信息", exact: true }).isChecked())
      .toBe(true)
    await page.close()
  })

  it("ticks a block of a session file: references get { path, block }, the rest of the manifest kept", async () => {
    const before = configOf("notebook-physics")
    const page = await open("/sessions/notebook-physics/blocks")
    await page.getByLabel("File", { exact: true }).selectOption("guidance.md")
    const style = page.getByRole("checkbox", {
      name: "Block of guidance.md: Tutor guidance/Style",
      exact: true
    })
    await style.check()
    await expect
      .poll(() => configOf("notebook-physics").references)
      .toEqual([
        ...(before.references as Array<unknown>),
        { path: "guidance.md", block: "Tutor guidance/Style" }
      ])
    expect(configOf("notebook-physics").profileBlocks).toEqual(before.profileBlocks)
    await style.uncheck()
    await expect.poll(() => configOf("notebook-physics").references).toEqual(before.references)
    await page.close()
  })

  it("keeps what is typed after a taken suggestion in place, however late the next frame comes", async () => {
    const page = await open("/sessions/notebook-physics/chat")
    // Frames come late, as on a loaded machine or in a background tab.
    await page.evaluate(() => {
      const frame = window.requestAnimationFrame.bind(window)
      window.requestAnimationFrame = (f) => window.setTimeout(() => frame(f), 300)
    })
    const box = page.getByRole("combobox", { name: "Message" })
    await box.focus()
    await page.keyboard.type("Explain [guid")
    await page
      .getByRole("option", { name: /\[guidance\.md/ })
      .first()
      .waitFor()
    await page.keyboard.press("Enter")
    await page
      .getByRole("option", { name: /\[guidance\.md:\d+:\d+\]/ })
      .first()
      .waitFor()
    await page.keyboard.press("Enter")
    await page.keyboard.type("in one")
    // A late frame has come and gone: the caret is still where the typing left it.
    await page.waitForTimeout(500)
    await page.keyboard.type(" line")
    expect(await box.inputValue()).toMatch(/^Explain \[guidance\.md:\d+:\d+\] in one line$/)
    await page.close()
  })

  it("sends a chat with a reference from the autocomplete and shows it streaming, then as stored", async () => {
    const page = await open("/sessions/notebook-physics/chat")
    const box = page.getByRole("combobox", { name: "Message" })
    await box.focus()
    await page.keyboard.type("Explain [guid")
    await page
      .getByRole("option", { name: /\[guidance\.md/ })
      .first()
      .waitFor()
    await page.keyboard.press("Enter")
    await page
      .getByRole("option", { name: /\[guidance\.md:\d+:\d+\]/ })
      .first()
      .waitFor()
    await page.keyboard.press("Enter")
    const value = await box.inputValue()
    expect(value).toMatch(/^Explain \[guidance\.md:\d+:\d+\] $/)
    await page.keyboard.type("in one line, please")
    await page.keyboard.press("Control+Enter")
    // The streamed turn: several deltas, the local model's answer, the parts as the gateway's.
    const stats = page.getByTestId("stream-stats")
    await expect
      .poll(() => text(stats).catch(() => ""), { timeout: 20_000 })
      .toMatch(/^Turn 3: .*parts as the gateway's/)
    const deltas = Number(/(\d+) text deltas/.exec(await text(stats))?.[1])
    expect(deltas).toBeGreaterThan(1)
    // Recorded: the transcript shows turn 3 from history, the local model's answer quoting the message.
    await page.locator("[data-turn='3']").waitFor()
    expect(await text(page.locator("[data-turn='3']"))).toContain(`You said: ${value}in one line, please`)
    await page.close()
  })

  it("shows a tool call and its result in full and as stored", async () => {
    const page = await open("/sessions/notebook-physics/chat")
    const box = page.getByRole("combobox", { name: "Message" })
    await box.fill('call read_file {"path":"guidance.md"}')
    await box.press("Control+Enter")
    await page.locator("[data-turn='4'] [data-testid=tool-result]").waitFor({ timeout: 20_000 })
    const result = page.locator("[data-turn='4'] [data-testid=tool-result]")
    expect(await text(page.locator("[data-turn='4'] [data-testid=tool-call]"))).toContain("read_file")
    await result.locator("label", { hasText: /^Full$/ }).click()
    expect(await text(result)).toContain("Tutor guidance")
    await page.close()
  })

  it("pins a turn in the history: the next request carries it as a pinned turn", async () => {
    const page = await open("/sessions/notebook-physics/history")
    const pin = page.getByRole("button", { name: "Pin turn 1", exact: true })
    await pin.focus()
    await page.keyboard.press("Enter")
    await page.locator("[data-turn='1'] [data-testid=turn-pinned]").waitFor()
    await page.close()
    const context = await open("/sessions/notebook-physics/context")
    await context.getByRole("table", { name: "Sources" }).waitFor()
    expect(await text(context.getByRole("table", { name: "Sources" }))).toContain("pinned_history")
    await context.close()
  })

  it("excludes a tool result: the placeholder shows; restore brings it back", async () => {
    const page = await open("/sessions/notebook-physics/history")
    const turn = page.locator("[data-turn='4']")
    await turn.getByRole("button", { name: /^Exclude or dismiss / }).click()
    await turn.getByLabel(/Summary or reason/).fill("guidance read, nothing new")
    await turn.getByRole("button", { name: "Exclude", exact: true }).click()
    await turn.getByTestId("placeholder").waitFor()
    expect(await text(turn.getByTestId("placeholder"))).toContain(
      "excluded by the user: guidance read, nothing new"
    )
    await turn.getByRole("button", { name: /^Restore / }).click()
    await expect.poll(() => turn.getByTestId("placeholder").count()).toBe(0)
    await page.close()
  })

  it("compacts before a turn and shows its progress; the history shows the summary and its turns", async () => {
    const page = await open("/sessions/long-task/chat")
    const box = page.getByRole("combobox", { name: "Message" })
    await box.fill("What is the next step?")
    await box.press("Control+Enter")
    const compaction = page.getByTestId("compaction")
    await compaction.waitFor({ timeout: 30_000 })
    await expect
      .poll(() => text(compaction), { timeout: 30_000 })
      .toMatch(/Compacted: \d+ messages of turns 1, 2 archived/)
    await page.close()
    const history = await open("/sessions/long-task/history")
    await history.getByTestId("summary").waitFor()
    expect(await text(history.getByTestId("summary"))).toMatch(/turns 1, 2 \(4 messages\)/)
    await history.close()
  })

  it("shows the context for a chosen model and format, the prefix, and the diff against the previous turn", async () => {
    const page = await open("/sessions/notebook-physics/context")
    await page.getByTestId("request").waitFor()
    await page.getByLabel("Model", { exact: true }).selectOption("anthropic/claude-sonnet-4-5")
    await page.locator("label", { hasText: /^Anthropic$/ }).click()
    // A model's first compile loads its tokenizer: seconds on a loaded machine, not the poll's 1 s.
    await expect
      .poll(() => text(page.getByTestId("context-model")), { timeout: 15_000 })
      .toContain("anthropic/claude-sonnet-4-5 · anthropic")
    expect(JSON.parse(await text(page.getByTestId("request")))).toHaveProperty("system")
    expect(await text(page.getByTestId("prefix"))).toMatch(/hash [0-9a-f]{16}, \d+ tokens/)
    expect(await text(page.getByTestId("budget-summary"))).toMatch(
      /of [\d,]+ available tokens \(window 200,000/
    )
    await expect.poll(() => text(page.getByTestId("diff-summary"))).toMatch(/\d+ lines added, \d+ removed/)
    expect(await text(page.getByTestId("diff"))).toMatch(/^\+ /m)
    // A small window: what was cut, and why.
    await page.getByLabel("Model", { exact: true }).selectOption("test/small")
    await expect
      .poll(() => text(page.getByTestId("context-model")), { timeout: 15_000 })
      .toContain("test/small")
    const cuts = page.getByRole("table", { name: "Cuts" })
    await cuts.waitFor()
    expect(await cuts.locator("tbody tr").count()).toBeGreaterThan(0)
    expect(await text(cuts)).toMatch(/(dropped|cut): \S/)
    await page.close()
  })

  it("shows every view at 1280x800 and 390x844, none wider than the screen (screenshots in .reports)", async () => {
    const views = [
      ["sessions", "/"],
      ["session", "/sessions/notebook-physics"],
      ["chat", "/sessions/notebook-physics/chat"],
      ["blocks", "/sessions/notebook-physics/blocks"],
      ["context", "/sessions/notebook-physics/context"],
      ["history", "/sessions/long-task/history"],
      ["aggregate", "/aggregate"],
      ["memory", "/memory"]
    ] as const
    for (const viewport of [
      { width: 1280, height: 800 },
      { width: 390, height: 844 }
    ]) {
      for (const [name, path] of views) {
        const page = await open(path, viewport)
        await page.locator("main h2").first().waitFor()
        await page.waitForLoadState("networkidle")
        // Every load answered: no view is shown half loaded.
        await page.waitForFunction(() => document.querySelector("[aria-label=Loading]") === null)
        const wide = await page.evaluate(() => document.documentElement.scrollWidth)
        expect([name, viewport.width, wide <= viewport.width]).toEqual([name, viewport.width, true])
        const file = join(screenshots, `${name}-${viewport.width}x${viewport.height}.png`)
        await page.screenshot({ path: file })
        expect(statSync(file).size).toBeGreaterThan(5_000)
        if (viewport.width === 390) {
          // On a phone the navigation is behind the menu button.
          await page.getByRole("button", { name: "Open navigation" }).click()
          await page.getByRole("link", { name: "Memory (L3, L4)" }).waitFor({ state: "visible" })
        }
        await page.close()
      }
    }
  }, 240_000)

  it("aggregates sessions into one request with each block's provenance", async () => {
    const page = await open("/aggregate")
    await page.getByRole("checkbox", { name: "notebook-physics" }).check()
    await page.getByRole("checkbox", { name: "code-agent-auth" }).check()
    await page.getByLabel("Question", { exact: true }).fill("What was wrong in src/auth.ts?")
    await page.getByLabel("Model", { exact: true }).selectOption("openai/gpt-4o")
    await page.getByRole("button", { name: "Aggregate", exact: true }).click()
    await page.getByRole("table", { name: "Aggregated blocks" }).waitFor({ timeout: 30_000 })
    expect(await text(page.getByRole("table", { name: "Aggregated blocks" }))).toContain(
      "code-agent-auth · L1 · recent_history"
    )
    await page.close()
  })

  it("has no console errors on any page it opened", () => {
    expect(consoleErrors).toEqual([])
  })
})

describe("with API keys configured", () => {
  it("loads the page without a key, names the missing key, and works once one is entered", async () => {
    const key = "workbench-test-key-0123456789"
    const keyed = await startGateway({ env: { CTXO_API_KEYS: `${key}:acme` } })
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
    try {
      await page.goto(`${keyed.baseUrl}/`)
      await page.getByRole("alert").waitFor()
      expect(await text(page.getByRole("alert"))).toContain("Unauthorized: An API key is required")
      await page.getByRole("button", { name: "API key" }).click()
      await page.getByRole("textbox", { name: "Key" }).fill(key)
      await page.getByRole("button", { name: "Use this key" }).click()
      await page.getByRole("table", { name: "Sessions" }).waitFor()
    } finally {
      await page.close()
      await keyed.stop()
    }
  })
})
