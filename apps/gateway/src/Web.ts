/**
 * The workbench page (`apps/web`, built by Vite into `apps/web/dist`) served beside the API: its
 * `index.html` at `/` and at the page's own routes (`/aggregate`, `/memory`, `/sessions/...`, so a
 * reload or a shared link opens the same view), its hashed files under `/assets/`.
 *
 * Who may load it is `Routes`' decision: these paths are public, since the page holds no data; with
 * API keys configured, every API call the page makes needs a key (the page asks for one). Any other
 * path (`/api/...`, `/v1/...`, a typo) is not the page's: it keeps the API's 404. A data root
 * without a built page answers its routes with a 503 that says how to build it.
 */
import { readFile } from "node:fs/promises"
import { extname, join } from "node:path"
import { fileURLToPath } from "node:url"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect } from "effect"

/** Where `pnpm --filter @ctxo/web build` puts the page (from `src/` and from a bundle in `dist/` alike). */
export const defaultWebDir = fileURLToPath(new URL("../../web/dist", import.meta.url))

/** The page's own routes: each answers `index.html`, the page then shows the view the path names. */
export const PAGE_ROUTES = ["/", "/aggregate", "/memory", "/sessions/*"] as const
/** The page's built files (Vite names them by content hash). */
export const ASSET_ROUTE = "/assets/*" as const

const CONTENT_TYPES: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".html": "text/html; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".woff2": "font/woff2",
  ".woff": "font/woff",
  ".map": "application/json; charset=utf-8",
  ".json": "application/json; charset=utf-8"
}

/** Scripts and styles from the page itself only; Mantine sets inline styles; the API is same-origin. */
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'none'"

const notBuilt = (dir: string) =>
  HttpServerResponse.text(
    `The workbench page is not built (no index.html in ${dir}): pnpm start builds it, or run pnpm --filter @ctxo/web build.\n`,
    { status: 503, contentType: "text/plain; charset=utf-8" }
  )

/** A percent-decoded path segment; a malformed escape is no file name (not a 500). */
const decoded = (segment: string) => {
  try {
    return decodeURIComponent(segment)
  } catch {
    return ""
  }
}

const read = (file: string) => Effect.tryPromise(() => readFile(file)).pipe(Effect.option)

/** The routes of the page over the files in `dir`. */
export const layerAt = (dir: string) =>
  HttpApiBuilder.Router.use((router) =>
    Effect.gen(function* () {
      const index = Effect.gen(function* () {
        const html = yield* read(join(dir, "index.html"))
        if (html._tag === "None") return notBuilt(dir)
        return HttpServerResponse.uint8Array(html.value, {
          contentType: CONTENT_TYPES[".html"]!,
          headers: {
            "cache-control": "no-cache",
            "content-security-policy": CSP,
            "x-content-type-options": "nosniff",
            "referrer-policy": "no-referrer"
          }
        })
      })
      for (const path of PAGE_ROUTES) yield* router.get(path, index)
      yield* router.get(
        ASSET_ROUTE,
        Effect.gen(function* () {
          const request = yield* HttpServerRequest.HttpServerRequest
          const name = decoded(new URL(request.url, "http://page").pathname.slice("/assets/".length))
          // One file name of Vite's making: letters, digits, `-`, `_`, `.`; never a folder or `..`.
          if (!/^[\w-]+(\.[\w-]+)+$/.test(name)) return HttpServerResponse.empty({ status: 404 })
          const file = yield* read(join(dir, "assets", name))
          if (file._tag === "None") return HttpServerResponse.empty({ status: 404 })
          return HttpServerResponse.uint8Array(file.value, {
            contentType: CONTENT_TYPES[extname(name)] ?? "application/octet-stream",
            headers: {
              "cache-control": "public, max-age=31536000, immutable",
              "x-content-type-options": "nosniff"
            }
          })
        })
      )
    })
  )
