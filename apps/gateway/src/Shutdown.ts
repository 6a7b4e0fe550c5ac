/**
 * The gateway's shutdown signal. It fires when the server's layer is released (SIGINT, SIGTERM),
 * before the HTTP server waits for its connections: open chat streams end with an `error` event
 * (`Shutdown`) instead of holding the process, and their turns stay resumable.
 */
import * as HttpServer from "@effect/platform/HttpServer"
import { Context, Deferred, Effect, Layer } from "effect"

export class Shutdown extends Context.Tag("@ctxo/gateway/Shutdown")<Shutdown, Deferred.Deferred<void>>() {}

/** Needs the HTTP server, so it is released before it (layers release in reverse order). */
export const layer: Layer.Layer<Shutdown, never, HttpServer.HttpServer> = Layer.scoped(
  Shutdown,
  Effect.gen(function* () {
    yield* HttpServer.HttpServer
    const signal = yield* Deferred.make<void>()
    yield* Effect.addFinalizer(() => Deferred.succeed(signal, undefined))
    return signal
  })
)
