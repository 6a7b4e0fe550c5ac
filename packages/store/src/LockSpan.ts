/**
 * The time spent waiting for a lock, as a span of its own (`Store.lock`): it starts when the lock is
 * asked for and ends when it is held (or the wait ends otherwise), so a trace shows the wait, not
 * the work done under the lock (which stays a child of the caller's span). None when tracing is off.
 */
import { Clock, Effect, Exit } from "effect"
import { tracing } from "./Spans.ts"

/** Runs `take(entered)`, where `entered` must run first thing once the lock is held. */
export const timedWait = <A, E, R>(
  sessionId: string,
  take: (entered: Effect.Effect<void>) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.flatMap(tracing, (on) =>
    !on
      ? take(Effect.void)
      : Effect.flatMap(
          Effect.makeSpan("Store.lock", {
            attributes: { "ctxo.session": sessionId },
            captureStackTrace: false
          }),
          (span) => {
            const end = Effect.flatMap(Clock.currentTimeNanos, (now) =>
              Effect.sync(() => {
                if (span.status._tag === "Started") span.end(now, Exit.void)
              })
            )
            return Effect.ensuring(take(end), end)
          }
        )
  )
