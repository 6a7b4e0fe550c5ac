/**
 * Which store the gateway's tenants are served from: the file store under `CTXO_DATA_DIR` (the
 * embedded default), or PostgreSQL when `CTXO_DATABASE_URL` is set (`@ctxo/store-pg`: many
 * replicas on one database, the turn lock held across them). `TenantServices` asks it for each
 * tenant's store. The PostgreSQL backend (`StoreBackendPg.ts`, with the driver) is loaded only when
 * it is asked for: a gateway on the file store does not parse it at start.
 */
import { resolve } from "node:path"
import type * as SessionCache from "@ctxo/store/SessionCache"
import * as Store from "@ctxo/store/Store"
import type { StoreError } from "@ctxo/store/StoreErrors"
import type { DatabaseUnavailable } from "@ctxo/store-pg/DatabaseConfig"
import { Context, Effect, Layer, Option } from "effect"
import { GatewayConfig } from "./GatewayConfig.ts"

export interface Backend {
  readonly kind: "files" | "postgres"
  /** Where the data is, for logs: the data folder, or `host:port/database` (never a password). */
  readonly label: string
  /**
   * The store of `tenant`, whose data root (its name in per-session state and errors) is `root`,
   * keeping its sessions in the process's `cache`.
   */
  readonly storeOf: (tenant: string, root: string, cache: SessionCache.Service) => Store.Service
}

export class StoreBackend extends Context.Tag("@ctxo/gateway/StoreBackend")<StoreBackend, Backend>() {}

/** The file store: each tenant's root is a folder. */
export const files = (label: string): Backend => ({
  kind: "files",
  label,
  storeOf: (_, root, cache) => Store.makeUnsafe(root, { cache })
})

/** The backend the configuration asks for (the example data seeds an empty database without API keys). */
export const layer: Layer.Layer<StoreBackend, DatabaseUnavailable | StoreError, GatewayConfig> =
  Layer.unwrapEffect(
    Effect.flatMap(GatewayConfig, (config) => {
      const database = config.database
      if (database === undefined) return Effect.succeed(Layer.succeed(StoreBackend, files(config.dataDir)))
      const seed =
        config.apiKeys.length === 0 && Option.isNone(config.adminKey)
          ? { from: config.seedDir, root: resolve(config.dataDir) }
          : undefined
      return Effect.promise(() => import("./StoreBackendPg.ts")).pipe(
        Effect.map(
          (pg): Layer.Layer<StoreBackend, DatabaseUnavailable | StoreError> => pg.postgres(database, seed)
        )
      )
    })
  )
