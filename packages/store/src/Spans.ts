/**
 * Annotating the current span where tracing may be off. Effect's `annotateCurrentSpan` finds the
 * span through a failure: with tracing off (the gateway without an OTLP endpoint) every call builds
 * a `NoSuchElementException` with its stack trace, on every compile and turn. `annotateSpan` asks
 * whether tracing is on first and does nothing when it is not.
 */
import { Effect, FiberRef } from "effect"

export const annotateSpan = (values: Readonly<Record<string, unknown>>): Effect.Effect<void> =>
  Effect.flatMap(FiberRef.get(FiberRef.currentTracerEnabled), (on) =>
    on ? Effect.annotateCurrentSpan(values) : Effect.void
  )
