/**
 * Which store the gateway's tenants are served from: the file store under `CTXO_DATA_DIR` (the
 * embedded default), or PostgreSQL when `CTXO_DATABASE_URL` is set (`@ctxo/store-pg`: many
 * replicas on one database, the turn lock held across them). `TenantServices` asks it for each
 * tenant's store.
 */
import { resolve } from "node:path"
import * as Store from "@ctxo/store/Store"
import type { StoreError } from "@ctxo/store/StoreErrors"
import * as Database from "@ctxo/store-pg/Database"
import * as PgStore from "@ctxo/store-pg/PgStore"
import * as Transfer from "@ctxo/store-pg/Transfer"
import { Context, Effect, Layer, Option } from "effect"
import { GatewayConfig } from "./GatewayConfig.ts"
import { DEFAULT_TENANT } from "./Tenancy.ts"

export interface Backend {
  readonly kind: "files" | "postgres"
  /** Where the data is, for logs: the data folder, or `host:port/database` (never a password). */
  readonly label: string
  /** The store of `tenant`, whose data root (its name in per-session state and errors) is `root`. */
  readonly storeOf: (tenant: string, root: string) => Store.Service
}

export class StoreBackend extends Context.Tag("@ctxo/gateway/StoreBackend")<StoreBackend, Backend>() {}

/** The file store: each tenant's root is a folder. */
export const files = (label: string): Backend => ({
  kind: "files",
  label,
  storeOf: (_, root) => Store.makeUnsafe(root)
})

/**
 * PostgreSQL: one database for every tenant, its schema migrated when the layer starts. With
 * `seed`, a database whose default tenant is empty (no session, no global file) gets that data
 * root's data first, as an empty data folder does (once, whichever replica starts first).
 */
export const postgres = (
  options: Database.DatabaseOptions,
  seed?: { readonly from: string; readonly root: string }
): Layer.Layer<StoreBackend | Database.Database, Database.DatabaseUnavailable | StoreError> =>
  Layer.effect(
    StoreBackend,
    Effect.gen(function* () {
      const db = yield* Database.Database
      const backend: Backend = {
        kind: "postgres",
        label: db.label,
        storeOf: (tenant, root) => PgStore.makeWith(db, { root, tenant })
      }
      if (seed !== undefined)
        yield* db
          .withLock("ctxo seed", () =>
            Effect.gen(function* () {
              const target = backend.storeOf(DEFAULT_TENANT, seed.root)
              const there = yield* Transfer.isEmpty(target)
              if (there.sessions > 0 || there.files > 0) return
              const moved = yield* Transfer.copy(Store.makeUnsafe(seed.from), {
                store: target,
                importer: PgStore.importerWith(db, DEFAULT_TENANT),
                label: db.label
              })
              yield* Effect.logInfo(
                `Seeded the database ${db.label} with the example data (${moved.sessions} sessions)`
              )
            })
          )
          .pipe(
            Effect.catchTags({
              LockUnavailable: (e) =>
                Effect.fail(new Database.DatabaseUnavailable({ database: db.label, reason: e.message })),
              TargetNotEmpty: () => Effect.void
            })
          )
      return backend
    })
  ).pipe(Layer.provideMerge(Database.layer(options)))

/** The backend the configuration asks for (the example data seeds an empty database without API keys). */
export const layer: Layer.Layer<StoreBackend, Database.DatabaseUnavailable | StoreError, GatewayConfig> =
  Layer.unwrapEffect(
    Effect.map(GatewayConfig, (config) =>
      config.database === undefined
        ? Layer.succeed(StoreBackend, files(config.dataDir))
        : postgres(
            config.database,
            config.apiKeys.length === 0 && Option.isNone(config.adminKey)
              ? { from: config.seedDir, root: resolve(config.dataDir) }
              : undefined
          )
    )
  )
