/**
 * The connection to PostgreSQL a deployment's stores share: the query pool (`@effect/sql-pg`), a
 * second small pool whose connections hold the per-session turn locks (one connection per session
 * in a turn on this process), and the schema, migrated when the layer starts (`Migrations.ts`;
 * replicas starting together migrate once: the first takes a lock, the others find it done).
 *
 * | variable | default | what |
 * |---|---|---|
 * | CTXO_DATABASE_URL | (none: the file store) | `postgres://user:password@host:5432/database` |
 * | CTXO_DATABASE_POOL_SIZE | 10 | connections for queries, per process |
 * | CTXO_DATABASE_LOCK_CONNECTIONS | 32 | sessions that may be in a turn at once on one process (each holds a connection for its lock) |
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Context, Duration, Effect, Layer, Redacted } from "effect"
import * as Pg from "pg"
import { type DatabaseOptions, DatabaseUnavailable, labelOf } from "./DatabaseConfig.ts"
import { type Held, LockUnavailable, withAdvisoryLock } from "./internal/advisoryLocks.ts"
import { MIGRATIONS_TABLE, migrations } from "./Migrations.ts"

export interface Service {
  readonly sql: SqlClient.SqlClient
  /** Where it is, for logs and errors: `host:port/database`, never the password. */
  readonly label: string
  /** Runs `use` holding the lock `name` across every process on this database. */
  readonly withLock: <A, E, R>(
    name: string,
    use: (held: Held) => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | LockUnavailable, R>
}

export class Database extends Context.Tag("@ctxo/store-pg/Database")<Database, Service>() {}

const reasonOf = (e: unknown): string => {
  const cause = (e as { readonly cause?: unknown }).cause
  const inner = cause instanceof Error ? cause : e instanceof Error ? e : undefined
  const text = inner?.message ?? String(e)
  return (text === "" ? ((inner as { code?: string } | undefined)?.code ?? "no answer") : text).slice(0, 300)
}

/**
 * The database's services, its schema migrated. Fails with `DatabaseUnavailable` when it cannot be
 * reached or migrated.
 */
export const layer = (
  options: DatabaseOptions
): Layer.Layer<Database | SqlClient.SqlClient, DatabaseUnavailable> => {
  const url = Redacted.value(options.url)
  const label = labelOf(url)
  const unavailable = (e: unknown) => new DatabaseUnavailable({ database: label, reason: reasonOf(e) })
  const client = Layer.scopedContext(
    Effect.map(
      PgClient.make({
        url: options.url,
        maxConnections: options.poolSize ?? 10,
        applicationName: options.applicationName ?? "ctxo",
        connectTimeout: Duration.seconds(10)
      }),
      (pg) => Context.make(PgClient.PgClient, pg).pipe(Context.add(SqlClient.SqlClient, pg))
    )
  ).pipe(Layer.provide(Reactivity.layer), Layer.mapError(unavailable))
  const database = Layer.scoped(
    Database,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const locks = yield* Effect.acquireRelease(
        Effect.sync(() => {
          const pool = new Pg.Pool({
            connectionString: url,
            max: options.lockConnections ?? 32,
            application_name: `${options.applicationName ?? "ctxo"} locks`,
            connectionTimeoutMillis: 10_000
          })
          // An idle connection that breaks is dropped by the pool; nothing to do here.
          pool.on("error", () => {})
          return pool
        }),
        (pool) => Effect.promise(() => pool.end()).pipe(Effect.timeoutOption("2 seconds"))
      )
      const service: Service = {
        sql,
        label,
        withLock: (name, use) => withAdvisoryLock(locks, name, use)
      }
      // Replicas starting together: one migrates, the others wait for it and find nothing to do.
      yield* service
        .withLock("ctxo migrations", () =>
          Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: MIGRATIONS_TABLE })
        )
        .pipe(Effect.mapError(unavailable))
      return service
    })
  )
  return Layer.provideMerge(database, client)
}

export { type DatabaseOptions, DatabaseUnavailable, labelOf, optionsConfig } from "./DatabaseConfig.ts"
export { LockUnavailable }
