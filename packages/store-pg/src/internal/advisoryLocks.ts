/**
 * Locks held across processes: a PostgreSQL session-level advisory lock, taken on a connection of
 * its own (from a pool kept apart from the query pool, so a turn holding a lock never waits for a
 * connection that lock holders keep) and held for as long as the locked effect runs.
 *
 * - Released when the effect ends, fails or is interrupted (`pg_advisory_unlock`, then the
 *   connection goes back to the pool); a process that dies releases every lock it held because its
 *   connections close.
 * - A fiber waiting for a lock that is interrupted (a client gone) closes its connection, which
 *   ends the wait in the server.
 * - A lock whose connection breaks while held is lost: the connection is dropped on release, and
 *   the holder is told by `lost` (a caller can refuse to write once it is lost).
 */
import { createHash } from "node:crypto"
import { Data, Effect } from "effect"
import type * as Pg from "pg"

/** The 64-bit key of a lock name (the first 8 bytes of its SHA-256, signed, as Postgres' bigint). */
export const lockKey = (name: string): string =>
  BigInt.asIntN(64, BigInt(`0x${createHash("sha256").update(name).digest("hex").slice(0, 16)}`)).toString()

/** A lock that could not be taken: no connection for it, or the database refused. */
export class LockUnavailable extends Data.TaggedError("LockUnavailable")<{
  readonly lock: string
  readonly reason: string
}> {
  override get message() {
    return `Cannot take the lock of ${this.lock.replace(/\u0000/g, " ")} in the database: ${this.reason}`
  }
}

export interface Held {
  /** Whether the lock's connection broke while it was held (the lock is gone). */
  readonly lost: () => boolean
}

const reasonOf = (e: unknown) => (e instanceof Error ? e.message : String(e))

/**
 * Runs `use` holding the advisory lock `name` on a connection of `pool`. Waiting is interruptible;
 * failing to connect or to lock is a `LockUnavailable`.
 */
export const withAdvisoryLock = <A, E, R>(
  pool: Pg.Pool,
  name: string,
  use: (held: Held) => Effect.Effect<A, E, R>
): Effect.Effect<A, E | LockUnavailable, R> => {
  const key = lockKey(name)
  return Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(restore(acquire(pool, name, key)), (taken) =>
      restore(use({ lost: () => taken.lost })).pipe(Effect.ensuring(release(taken, key)))
    )
  )
}

interface Taken {
  readonly client: Pg.PoolClient
  readonly done: (error?: Error) => void
  readonly onError: () => void
  lost: boolean
}

const acquire = (pool: Pg.Pool, name: string, key: string) =>
  Effect.async<Taken, LockUnavailable>((resume) => {
    let cancelled = false
    let pending: Pg.PoolClient | undefined
    pool.connect((error, client, done) => {
      if (error !== undefined && error !== null) {
        if (!cancelled) resume(Effect.fail(new LockUnavailable({ lock: name, reason: reasonOf(error) })))
        return
      }
      if (client === undefined) {
        if (!cancelled) resume(Effect.fail(new LockUnavailable({ lock: name, reason: "no connection" })))
        return
      }
      if (cancelled) {
        done()
        return
      }
      pending = client
      const taken: Taken = {
        client,
        done,
        onError: () => {
          taken.lost = true
        },
        lost: false
      }
      // A connection that breaks while held: the lock is gone with it (and no process crashes).
      client.on("error", taken.onError)
      client.query("SELECT pg_advisory_lock($1::bigint)", [key], (lockError) => {
        if (cancelled) return
        if (lockError !== undefined && lockError !== null) {
          client.off("error", taken.onError)
          done(lockError)
          resume(Effect.fail(new LockUnavailable({ lock: name, reason: reasonOf(lockError) })))
          return
        }
        resume(Effect.succeed(taken))
      })
    })
    return Effect.sync(() => {
      cancelled = true
      // Closing the connection ends the wait in the server (and any lock it got meanwhile).
      if (pending !== undefined) pending.release(new Error("the lock's waiter went away"))
    })
  })

const release = (taken: Taken, key: string) =>
  Effect.async<void>((resume) => {
    const done = (error?: Error) => {
      taken.client.off("error", taken.onError)
      taken.done(error)
      resume(Effect.void)
    }
    if (taken.lost) return done(new Error("the lock's connection broke"))
    taken.client.query("SELECT pg_advisory_unlock($1::bigint)", [key], (error) =>
      // A connection that cannot unlock is closed: closing releases the lock.
      done(error === undefined || error === null ? undefined : error)
    )
  })
