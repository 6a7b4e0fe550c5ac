/**
 * Which route of the contract a request reaches, decided the way the HTTP router decides it.
 *
 * The router (`find-my-way-ts` under `HttpRouter`) matches case-insensitively, collapses `//`,
 * ignores a trailing slash and decodes percent-escapes, so the raw URL says little: `/Admin/tenants`,
 * `//admin/tenants` and `/%61dmin/tenants` all reach the admin endpoint. Authorization and the
 * error shape are decided here, on the same matcher with the same options over the contract's own
 * endpoints, never on the raw path. A request no endpoint matches is treated as a tenant route
 * (it needs a tenant's key, then answers 404). The workbench page's routes (`Web`) are public: the
 * page holds no data, and the API calls it makes need a key like any other.
 */
import { Api } from "@ctxo/api/Api"
import * as HttpApi from "@effect/platform/HttpApi"
import * as FindMyWay from "find-my-way-ts"
import { ASSET_ROUTE, PAGE_ROUTES } from "./Web.ts"

/** Who may call a route: anyone (health, the page), the admin key, a tenant's key, or any valid key (docs). */
export type Audience = "public" | "admin" | "tenant" | "anyKey"

export interface Route {
  /** The contract group of the matched endpoint, if one matched. */
  readonly group: string | undefined
  readonly audience: Audience
  /** Errors on this route use OpenAI's shape (`/v1`). */
  readonly openAI: boolean
}

const audienceOf = (group: string): Audience =>
  group === "health" || group === "web"
    ? "public"
    : group === "admin"
      ? "admin"
      : group === "docs"
        ? "anyKey"
        : "tenant"

// The router's defaults (HttpRouter builds its matcher with `FindMyWay.make(config)` and an empty
// config unless `HttpRouter.setRouterConfig` says otherwise; this gateway sets none).
const router = FindMyWay.make<string>()
const methods = new Set<string>()
HttpApi.reflect(Api, {
  onGroup: () => {},
  onEndpoint: ({ group, endpoint }) => {
    router.on(endpoint.method, endpoint.path, group.identifier)
    methods.add(endpoint.method)
  }
})
// The documentation the server adds beside the contract: any valid key may read it.
for (const path of ["/openapi.json", "/docs"] as const) router.on("GET", path, "docs")
for (const path of [...PAGE_ROUTES, ASSET_ROUTE]) router.on("GET", path, "web")
methods.add("GET")

/** The route `method url` reaches (also for a method the path does not have: its owner decides). */
export const routeOf = (method: string, url: string): Route => {
  let found = router.find(method, url)
  if (found === undefined && method === "HEAD") found = router.find("GET", url)
  if (found === undefined)
    for (const m of methods) {
      found = router.find(m, url)
      if (found !== undefined) break
    }
  const group = found?.handler
  return {
    group,
    audience: group === undefined ? "tenant" : audienceOf(group),
    openAI: group === "openai" || (group === undefined && /^\/*v1(\/|$)/i.test(url))
  }
}
