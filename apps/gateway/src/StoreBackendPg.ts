/**
 * The PostgreSQL backend of `StoreBackend`: one database for every tenant (`@ctxo/store-pg`),
 * loaded by `StoreBackend.layer` only when `CTXO_DATABASE_URL` is set.
 */
import * as SessionCache from "@ctxo/store/SessionCache"
import * as Store from "@ctxo/store/Store"
import type { StoreError } from "@ctxo/store/StoreErrors"
import * as Database from "@ctxo/store-pg/Database"
import * as PgStore from "@ctxo/store-pg/PgStore"
import * as Transfer from "@ctxo/store-pg/Transfer"
import { Effect, Layer } from "effect"
import { type Backend, StoreBackend } from "./StoreBackend.ts"
import { DEFAULT_TENANT } from "./Tenancy.ts"

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
        storeOf: (tenant, root, cache) => PgStore.makeWith(db, { root, tenant, cache })
      }
      if (seed !== undefined)
        yield* db
          .withLock("ctxo seed", () =>
            Effect.gen(function* () {
              const target = backend.storeOf(DEFAULT_TENANT, seed.root, SessionCache.make())
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
