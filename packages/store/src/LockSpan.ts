/**
 * The time spent waiting for a lock, as a span of its own (`Store.lock`): it starts when the lock is
 * asked for and ends when it is held (or the wait ends otherwise), so a trace shows the wait, not
 * the work done under the lock (which stays a child of the caller's span). None when tracing is off.
 */
import { Effect } from "effect"
import { startSpan } from "./Spans.ts"

/** Runs `take(entered)`, where `entered` must run first thing once the lock is held. */
export const timedWait = <A, E, R>(
  sessionId: string,
  take: (entered: Effect.Effect<void>) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.flatMap(startSpan("Store.lock", { attributes: { "ctxo.session": sessionId } }), (end) =>
    Effect.ensuring(take(end), end)
  )
