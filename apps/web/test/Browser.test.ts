import { afterEach, describe, expect, it } from "vitest"
import { findChromium } from "./browser.ts"

const saved = process.env.CTXO_CHROMIUM
afterEach(() => {
  if (saved === undefined) delete process.env.CTXO_CHROMIUM
  else process.env.CTXO_CHROMIUM = saved
})

describe("finding a Chromium for the browser tests", () => {
  it("takes CTXO_CHROMIUM first, and names it when it does not exist", () => {
    process.env.CTXO_CHROMIUM = process.execPath
    expect(findChromium()).toBe(process.execPath)
    process.env.CTXO_CHROMIUM = "/nonexistent/chromium"
    expect(() => findChromium()).toThrow(
      "CTXO_CHROMIUM is /nonexistent/chromium, which does not exist: point it at a Chromium binary"
    )
  })
})
