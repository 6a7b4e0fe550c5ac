/**
 * The page `/docs` answers, as `@effect/platform`'s `HttpApiScalar.layer` makes it (the Scalar API
 * reference with its script inline): that layer is built once over a router of its own, and the
 * answer of the route it added is the page. Imported only when `/docs` is first asked for
 * (`Docs.ts`): this module and the 3.4 MB script are a chunk of the bundle of their own.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiScalar from "@effect/platform/HttpApiScalar"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Chunk, Context, Effect, Layer, Option } from "effect"

export const scalarPage = (api: HttpApi.HttpApi.Any): Promise<string> =>
  Effect.gen(function* () {
    // The layer adds its route to the router it is given (the same `Router.Live`: one instance).
    const built = yield* Layer.build(
      Layer.provideMerge(HttpApiScalar.layer({ path: "/docs" }), HttpApiBuilder.Router.Live)
    )
    const router = yield* Context.get(built, HttpApiBuilder.Router).router
    const route = Chunk.findFirst(router.routes, (r) => r.path === "/docs")
    if (Option.isNone(route)) return yield* Effect.dieMessage("HttpApiScalar.layer added no /docs route")
    const response = HttpServerResponse.isServerResponse(route.value.handler)
      ? route.value.handler
      : yield* route.value.handler as Effect.Effect<HttpServerResponse.HttpServerResponse>
    if (response.body._tag !== "Uint8Array")
      return yield* Effect.dieMessage(`the reference page is a ${response.body._tag} body`)
    return new TextDecoder().decode(response.body.body)
  }).pipe(
    Effect.scoped,
    Effect.provideService(HttpApi.Api, { api, context: Context.empty() } as Context.Tag.Service<HttpApi.Api>),
    Effect.runPromise
  )
