/**
 * API keys and tenants.
 *
 * Keys come from `CTXO_API_KEYS` (`key1:tenantA,key2:tenantB`) and/or a JSON file named by
 * `CTXO_API_KEYS_FILE` (`{ "keys": [{ "key": "...", "tenant": "..." }] }`); `CTXO_ADMIN_KEY` is the
 * key for the management endpoints (`/admin/*`). Keys are kept as SHA-256 hashes only. Each tenant
 * has its own data root, `<CTXO_DATA_DIR>/tenants/<tenant>/`: the store, history and compiler
 * services find it from the request's tenant (`CurrentTenant`), so one tenant never reaches
 * another's sessions. With no keys the gateway serves one tenant from `CTXO_DATA_DIR` itself,
 * without auth, on 127.0.0.1 only.
 */
import { createHash, timingSafeEqual } from "node:crypto"
import { join, relative, resolve } from "node:path"
import { Context, Effect, FiberRef, Layer, Option, Redacted } from "effect"
import { GatewayConfig } from "./GatewayConfig.ts"

export const DEFAULT_TENANT = "default"

/** The tenant of the request being served (set by the gateway's middleware). */
export const CurrentTenant = FiberRef.unsafeMake<string>(DEFAULT_TENANT)

/** Whether the request being served carries the admin key (set by the gateway's middleware). */
export const CallerIsAdmin = FiberRef.unsafeMake<boolean>(false)

const hash = (key: string) => createHash("sha256").update(key).digest()

export interface Access {
  /** True when keys are configured: every endpoint but health needs one. */
  readonly enabled: boolean
  /** The tenant of a key, if it is one (constant-time comparison of hashes). */
  readonly tenantOf: (key: string) => Option.Option<string>
  readonly isAdmin: (key: string) => boolean
  readonly tenants: ReadonlyArray<string>
  /** Concurrent requests a tenant may have in flight (CTXO_TENANT_MAX_CONCURRENT, default 16). */
  readonly maxConcurrent: number
  /**
   * Takes one of the tenant's places in flight: `undefined` when it has one (give it back with
   * `release`), else how many it has in flight (with keys, at most `maxConcurrent`).
   */
  readonly admit: (tenant: string) => number | undefined
  readonly release: (tenant: string) => void
  /** Where a tenant's data lives. */
  readonly rootOf: (tenant: string) => string
  /** Where a tenant's data lives, relative to the data root (`tenants/acme`; `.` without keys). */
  readonly relativeRootOf: (tenant: string) => string
}

export class Tenancy extends Context.Tag("@ctxo/gateway/Tenancy")<Tenancy, Access>() {}

export const make = (options: {
  readonly dataDir: string
  readonly keys: ReadonlyArray<{ readonly key: string; readonly tenant: string }>
  readonly adminKey: Option.Option<string>
  readonly maxConcurrent: number
}): Access => {
  const entries = options.keys.map((k) => ({ hash: hash(k.key), tenant: k.tenant }))
  const admin = Option.map(options.adminKey, hash)
  const enabled = entries.length > 0 || Option.isSome(admin)
  const inFlight = new Map<string, number>()
  return {
    enabled,
    tenantOf: (key) => {
      const h = hash(key)
      return Option.fromNullable(entries.find((e) => timingSafeEqual(e.hash, h))?.tenant)
    },
    isAdmin: (key) => Option.isSome(admin) && timingSafeEqual(admin.value, hash(key)),
    tenants: [...new Set(entries.map((e) => e.tenant))].sort(),
    maxConcurrent: options.maxConcurrent,
    admit: (tenant) => {
      const busy = inFlight.get(tenant) ?? 0
      if (enabled && busy >= options.maxConcurrent) return busy
      inFlight.set(tenant, busy + 1)
      return undefined
    },
    release: (tenant) => {
      const busy = (inFlight.get(tenant) ?? 1) - 1
      if (busy <= 0) inFlight.delete(tenant)
      else inFlight.set(tenant, busy)
    },
    rootOf: (tenant) => (enabled ? join(options.dataDir, "tenants", tenant) : options.dataDir),
    relativeRootOf: (tenant) =>
      enabled ? relative(options.dataDir, join(options.dataDir, "tenants", tenant)) : "."
  }
}

/** Tenancy from the gateway's settings. */
export const layer = Layer.effect(
  Tenancy,
  Effect.map(GatewayConfig, (config) =>
    make({
      dataDir: resolve(config.dataDir),
      keys: config.apiKeys,
      adminKey: Option.map(config.adminKey, Redacted.value),
      maxConcurrent: config.tenantMaxConcurrent
    })
  )
)
