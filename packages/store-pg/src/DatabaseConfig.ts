/**
 * The settings of the PostgreSQL store (`Database.layer`) and its error, without the driver: what
 * the gateway reads at start whether or not it is configured for PostgreSQL, so a gateway on the
 * file store never loads `pg`, `@effect/sql` or the PostgreSQL store (`Database.ts` re-exports all
 * of it).
 */
import { Config, Data, Option, Redacted } from "effect"

export interface DatabaseOptions {
  readonly url: Redacted.Redacted<string>
  /** Connections for queries (default 10). */
  readonly poolSize?: number
  /** Connections that hold turn locks (default 32). */
  readonly lockConnections?: number
  /** How the connections name themselves to the server (`pg_stat_activity`). */
  readonly applicationName?: string
}

/** The database cannot be used: which one (never its password) and why, in one sentence. */
export class DatabaseUnavailable extends Data.TaggedError("DatabaseUnavailable")<{
  readonly database: string
  readonly reason: string
}> {
  override get message() {
    return `Cannot use the database ${this.database}: ${this.reason}`
  }
}

/** `host:port/database` of a connection URL (what logs and errors may show). */
export const labelOf = (url: string): string => {
  try {
    const u = new URL(url)
    return `${u.hostname}:${u.port === "" ? "5432" : u.port}${u.pathname === "" ? "/" : u.pathname}`
  } catch {
    return "(an unreadable CTXO_DATABASE_URL)"
  }
}

/** The settings of `layer` from the environment; `None` when CTXO_DATABASE_URL is not set (the file store). */
export const optionsConfig: Config.Config<Option.Option<DatabaseOptions>> = Config.all({
  url: Config.option(Config.redacted("CTXO_DATABASE_URL")).pipe(
    Config.map(Option.filter((url) => Redacted.value(url).trim() !== ""))
  ),
  poolSize: Config.integer("CTXO_DATABASE_POOL_SIZE").pipe(
    Config.validate({ message: "at least 2 connections", validation: (n) => n >= 2 }),
    Config.withDefault(10)
  ),
  lockConnections: Config.integer("CTXO_DATABASE_LOCK_CONNECTIONS").pipe(
    Config.validate({ message: "at least 1 connection", validation: (n) => n >= 1 }),
    Config.withDefault(32)
  )
}).pipe(Config.map(({ url, ...rest }) => Option.map(url, (u): DatabaseOptions => ({ url: u, ...rest }))))
