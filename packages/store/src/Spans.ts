/**
 * Spans where tracing may be off (the gateway without an OTLP endpoint, the CLI, tests). With it
 * off, Effect still makes a span for every `withSpan`, and copies the fiber's context to hold it;
 * `annotateCurrentSpan` looks the span up through a failure, building a `NoSuchElementException`
 * with its stack trace. On the hot path (every compile, history change and turn), these ask whether
 * tracing is on first, and do nothing more when it is not. Their spans capture no stack trace unless
 * asked for: a compile alone makes seven, and each trace is an Error.
 */
import type { Tracer } from "effect"
import { Clock, Effect, Exit, FiberRef } from "effect"

/** Whether tracing is on (the tracer is enabled for the current fiber). */
export const tracing: Effect.Effect<boolean> = FiberRef.get(FiberRef.currentTracerEnabled)

/** `Effect.withSpan`, when tracing is on (no stack trace captured unless asked for). */
export const withSpan =
  (name: string, options?: Tracer.SpanOptions) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.flatMap(tracing, (on) =>
      on ? Effect.withSpan(self, name, { captureStackTrace: false, ...options }) : self
    )

/** Attributes on the current span, when tracing is on. */
export const annotateSpan = (values: Readonly<Record<string, unknown>>): Effect.Effect<void> =>
  Effect.flatMap(tracing, (on) => (on ? Effect.annotateCurrentSpan(values) : Effect.void))

/**
 * A span started now and ended by the effect it gives (the first time it runs), for what is not one
 * effect: a stage of pure code, the wait for a lock (no stack trace captured unless asked for). When
 * tracing is off, there is none, and ending it does nothing.
 */
export const startSpan = (name: string, options?: Tracer.SpanOptions): Effect.Effect<Effect.Effect<void>> =>
  Effect.flatMap(tracing, (on) =>
    on
      ? Effect.map(Effect.makeSpan(name, { captureStackTrace: false, ...options }), (span) =>
          Effect.flatMap(Clock.currentTimeNanos, (now) =>
            Effect.sync(() => {
              if (span.status._tag === "Started") span.end(now, Exit.void)
            })
          )
        )
      : Effect.succeed(Effect.void)
  )
