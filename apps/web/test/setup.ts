/**
 * Before the browser tests: the page built (when its sources changed, as `pnpm start` does) and a
 * Chromium found; without one, the run fails here with the sentence that says how to get one.
 */
import { ensureBuilt } from "../build.mjs"
import { findChromium } from "./browser.ts"

export default async () => {
  findChromium()
  await ensureBuilt()
}
