/**
 * `pnpm start`: the gateway on its embedded default. An empty data directory is seeded with the
 * example data; without an upstream API key the local deterministic model answers; without API
 * keys (CTXO_API_KEYS) it serves one tenant without authentication and listens on 127.0.0.1 only.
 * SIGINT and SIGTERM close the server: open chat streams end with a Shutdown event.
 */
import { resolve } from "node:path"
import * as V8Tuning from "@ctxo/agent/V8Tuning"
import { seedIfEmpty, makeUnsafe as storeOf } from "@ctxo/store/Store"
import { labelOf } from "@ctxo/store-pg/DatabaseConfig"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer, Logger, Option, Redacted } from "effect"
import * as GatewayConfig from "./GatewayConfig.ts"
import * as LogLines from "./LogLines.ts"
import { server } from "./Server.ts"
import * as Telemetry from "./Telemetry.ts"

const program = Effect.gen(function* () {
  const config = yield* GatewayConfig.GatewayConfig
  // Before the layers allocate: how far the heap grows before a full collection, and V8's
  // allocation-site pretenuring off (V8Tuning says why).
  const flags = V8Tuning.apply(config)
  const run = Effect.gen(function* () {
    yield* Effect.logInfo(
      flags.length === 0
        ? "V8 flags: none set (V8's own heap sizing and allocation-site pretenuring)"
        : `V8 flags: ${flags.join(" ")} (CTXO_HEAP_GROWING_PERCENT, CTXO_ALLOCATION_SITE_PRETENURING)`
    )
    const dataDir = resolve(config.dataDir)
    const open = config.apiKeys.length === 0 && Option.isNone(config.adminKey)
    // In PostgreSQL the store's layer seeds an empty database (StoreBackend).
    if (open && config.database === undefined) {
      if (yield* seedIfEmpty(dataDir, config.seedDir))
        yield* Effect.logInfo(`Seeded ${dataDir} with the example data`)
    }
    if (open) {
      yield* Effect.logWarning(
        `No API keys configured (CTXO_API_KEYS): serving one tenant without authentication, on 127.0.0.1 only${config.host === "127.0.0.1" ? "" : ` (HOST=${config.host} ignored)`}`
      )
    } else {
      const tenants = new Set(config.apiKeys.map((k) => k.tenant)).size
      yield* Effect.logInfo(
        `API keys for ${tenants} tenant${tenants === 1 ? "" : "s"}: every endpoint but /healthz and /readyz needs one; tenant data ${config.database === undefined ? `under ${dataDir}/tenants` : "in the database, by tenant"}`
      )
    }
    if (config.database === undefined) {
      // Temporary files of writes a crash interrupted (the target kept its old content) go now.
      const removed = yield* storeOf(dataDir).cleanTemporaryFiles.pipe(Effect.orElseSucceed(() => 0))
      if (removed > 0)
        yield* Effect.logInfo(
          `Removed ${removed} temporary file${removed === 1 ? "" : "s"} left by interrupted writes`
        )
      yield* Effect.logInfo(`Data directory ${dataDir}; default model ${config.model}`)
    } else
      yield* Effect.logInfo(
        `Data in PostgreSQL at ${labelOf(Redacted.value(config.database.url))}; default model ${config.model}`
      )
    const effective = open ? { ...config, host: "127.0.0.1" } : config
    // Traces and metrics over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set (Telemetry).
    return yield* Layer.launch(
      server.pipe(
        Layer.provide(Layer.succeed(GatewayConfig.GatewayConfig, effective)),
        Layer.provide(Telemetry.layer)
      )
    )
  })
  // One logger for everything: JSON lines when asked, else the readable one.
  return yield* run.pipe(Effect.provide(config.logFormat === "json" ? LogLines.json : Logger.pretty))
}).pipe(Effect.provide(GatewayConfig.layer))

NodeRuntime.runMain(program, { disablePrettyLogger: true })
