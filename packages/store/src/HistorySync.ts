/**
 * A history change is on disk (its journal record fdatasynced) before `updateHistory` returns.
 * Inside `deferSync`, a file store's history changes return once their record is written, and their
 * fdatasyncs are awaited together by the wait `deferSync` hands back: the caller does work that
 * tells nobody anything (a compile) while the disk syncs, and runs the wait before it answers or
 * sends anything. The other stores are durable when a change returns (the memory store has no disk;
 * PostgreSQL commits), so for them the wait is empty.
 *
 * The syncs start when the records are written. `deferSync` runs the wait when the caller's effect
 * ends without having run it (failed, interrupted): nothing of it goes on before they are done. It
 * runs once; running it again gives its first result.
 */
import { Effect, Either, FiberRef } from "effect"
import type { StoreError } from "./StoreErrors.ts"

interface Pending {
  readonly syncs: Array<Effect.Effect<void, StoreError>>
}

/** Where the history changes of the current fiber put their syncs, when they are deferred. */
export const deferredSyncs: FiberRef.FiberRef<Pending | undefined> = FiberRef.unsafeMake<Pending | undefined>(
  undefined
)

/**
 * Runs `write` with its history changes' fdatasyncs deferred, then `after(value, synced, pending)`,
 * where `synced` waits until every change `write` made is on disk (and fails as the sync failed),
 * and `pending` says whether there is anything to wait for (not on the memory and PostgreSQL stores).
 */
export const deferSync = <A, E, R, B, E2, R2>(
  write: Effect.Effect<A, E, R>,
  after: (value: A, synced: Effect.Effect<void, StoreError>, pending: boolean) => Effect.Effect<B, E2, R2>
): Effect.Effect<B, E | E2, R | R2> =>
  Effect.uninterruptibleMask((restore) => Effect.gen(() => deferred(write, after, restore)))

/** `deferSync`'s work: a generator made once, not per call (see `@ctxo/agent`'s `test/HotPath.test.ts`). */
function* deferred<A, E, R, B, E2, R2>(
  write: Effect.Effect<A, E, R>,
  after: (value: A, synced: Effect.Effect<void, StoreError>, pending: boolean) => Effect.Effect<B, E2, R2>,
  restore: <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>
) {
  const pending: Pending = { syncs: [] }
  // Every sync awaited, not stopping at a failure (the first one is the wait's), and not cut
  // short by an interruption.
  const synced = yield* Effect.cached(
    Effect.uninterruptible(
      Effect.flatMap(
        Effect.suspend(() => Effect.all(pending.syncs, { mode: "either" })),
        (results) => {
          const failed = results.find(Either.isLeft)
          return failed === undefined ? Effect.void : Effect.fail(failed.left)
        }
      )
    )
  )
  const value = yield* restore(Effect.locally(write, deferredSyncs, pending)).pipe(
    Effect.onError(() => Effect.ignore(synced))
  )
  return yield* restore(after(value, synced, pending.syncs.length > 0)).pipe(
    Effect.ensuring(Effect.ignore(synced))
  )
}
