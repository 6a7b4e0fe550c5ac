/**
 * The API's documents: `/openapi.json` and the interactive reference at `/docs` (Scalar, its script
 * inline, so it works offline), each made on its first request and kept, not at start. The
 * reference's script is 3.4 MB: it is a chunk of the bundle of its own (`internal/scalarPage.ts`,
 * imported when `/docs` is first asked for), so the gateway starts without parsing it (about 250 ms
 * sooner here).
 */

import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as OpenApi from "@effect/platform/OpenApi"
import { Effect } from "effect"

/** `make` run once, on the first call; its promise kept. */
const once = <A>(make: () => Promise<A>) => {
  let made: Promise<A> | undefined
  return () => (made ??= make())
}

export const layer = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function* () {
    const { api } = yield* HttpApi.Api
    const spec = once(async () => OpenApi.fromApi(api))
    const openApi: HttpApp.Default = Effect.promise(spec).pipe(
      Effect.flatMap((document) => HttpServerResponse.json(document)),
      Effect.orDie
    )
    const page = once(async () => (await import("./internal/scalarPage.ts")).scalarPage(api))
    yield* router.get("/openapi.json", openApi)
    yield* router.get(
      "/docs",
      Effect.map(Effect.promise(page), (html) => HttpServerResponse.html(html))
    )
  })
)
