/**
 * Who may make a request and what it may be refused for before any handler runs, as plain
 * functions shared by the Effect middleware (`Server`) and the plain node:http lane (`Lane`): the
 * caller's key for the route it reaches, a tenant's requests in flight, the refusal's body in the
 * route's error shape, the request id.
 */
import { Option } from "effect"
import { gatewayToOpenAI } from "./ErrorMapping.ts"
import type * as RequestBody from "./RequestBody.ts"
import type * as Routes from "./Routes.ts"
import * as Tenancy from "./Tenancy.ts"

let requestCounter = 0
/** A request id for a request that brought none (`x-request-id`). */
export const newRequestId = () => `req-${Date.now().toString(36)}-${(requestCounter++).toString(36)}`

/** An error the gateway answers itself (before any handler), in the route's error shape. */
export const refusalBody = (route: Routes.Route, refusal: RequestBody.Refusal) =>
  route.openAI
    ? gatewayToOpenAI(refusal.status, { tag: refusal.tag, message: refusal.message })
    : { error: { tag: refusal.tag, message: refusal.message } }

type Headers = Readonly<Record<string, string | string[] | undefined>>
const headerOf = (headers: Headers, name: string) => {
  const value = headers[name]
  return Array.isArray(value) ? value[0] : value
}

/** The caller's key: `Authorization: Bearer <key>` (what OpenAI clients send) or `x-api-key`. */
const keyOf = (headers: Headers) =>
  /^Bearer\s+(.+)$/i.exec(headerOf(headers, "authorization") ?? "")?.[1]?.trim() ??
  headerOf(headers, "x-api-key")

/** Who the caller is, for the route it reaches: a tenant, the admin, anyone, or a refusal. */
export const authorize = (
  headers: Headers,
  route: Routes.Route,
  access: Tenancy.Access
): { readonly tenant: string; readonly admin: boolean } | { readonly refused: RequestBody.Refusal } => {
  const key = keyOf(headers)
  const admin = key !== undefined && access.isAdmin(key)
  if (!access.enabled) return { tenant: Tenancy.DEFAULT_TENANT, admin: false }
  const keyTenant = key === undefined ? Option.none() : access.tenantOf(key)
  const refuse = (status: number, tag: string, message: string) => ({ refused: { status, tag, message } })
  const noKey = () =>
    refuse(
      401,
      "Unauthorized",
      key === undefined ? "An API key is required (Authorization: Bearer <key>)" : "The API key is not valid"
    )
  switch (route.audience) {
    case "public":
      return { tenant: Option.getOrElse(keyTenant, () => Tenancy.DEFAULT_TENANT), admin }
    case "admin":
      if (admin) return { tenant: Tenancy.DEFAULT_TENANT, admin }
      return Option.isSome(keyTenant)
        ? refuse(403, "Forbidden", "This key has no right to the management endpoints")
        : refuse(401, "Unauthorized", "A valid admin key is required (Authorization: Bearer <key>)")
    case "anyKey":
      if (admin) return { tenant: Tenancy.DEFAULT_TENANT, admin }
      return Option.isSome(keyTenant) ? { tenant: keyTenant.value, admin } : noKey()
    case "tenant":
      if (Option.isSome(keyTenant)) return { tenant: keyTenant.value, admin }
      return admin
        ? refuse(403, "Forbidden", "The admin key manages tenants; it reads no tenant's data")
        : noKey()
  }
}

/** A tenant over its limit of requests in flight (with keys: one gateway, many tenants). */
export const busyRefusal = (tenant: string, busy: number, access: Tenancy.Access): RequestBody.Refusal => ({
  status: 429,
  tag: "TooManyRequests",
  message: `Tenant ${tenant} has ${busy} requests in flight (limit ${access.maxConcurrent})`,
  headers: { "retry-after": "1" }
})
