/**
 * A Chromium for the browser tests. Playwright cannot download its browsers on these machines, so
 * the tests use an installed one, found in this order: `CTXO_CHROMIUM` (a path), Debian's
 * `/usr/bin/chromium`, then Playwright's own when one was installed. None is an error saying how to
 * get one: the tests never skip silently.
 */
import { existsSync } from "node:fs"
import { type Browser, chromium } from "playwright-core"

export const findChromium = (): string => {
  const fromEnv = process.env.CTXO_CHROMIUM
  if (fromEnv !== undefined && fromEnv !== "") {
    if (!existsSync(fromEnv))
      throw new Error(`CTXO_CHROMIUM is ${fromEnv}, which does not exist: point it at a Chromium binary`)
    return fromEnv
  }
  for (const path of ["/usr/bin/chromium", "/usr/bin/chromium-browser"]) if (existsSync(path)) return path
  let own: string | undefined
  try {
    own = chromium.executablePath()
  } catch {
    own = undefined
  }
  if (own !== undefined && existsSync(own)) return own
  throw new Error(
    "No Chromium found for the browser tests: install Debian's (apt-get install -y chromium; .ci/run does it) or set CTXO_CHROMIUM to a Chromium binary."
  )
}

/**
 * Headless Chromium, quiet on a closed network (without the background-networking switches it keeps
 * trying services it cannot reach). Playwright gives each launch a fresh profile of its own in a
 * temporary folder and removes it when the browser closes.
 */
export const launch = (): Promise<Browser> =>
  chromium.launch({
    executablePath: findChromium(),
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync"
    ]
  })
