/**
 * `pnpm start`: the gateway on its embedded default. An empty data directory is seeded with the
 * example data; without an upstream API key the local deterministic model answers. SIGINT and
 * SIGTERM close the server after open requests end or are interrupted.
 */
import { resolve } from "node:path"
import { seedIfEmpty } from "@ctxo/store/Store"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer, Logger } from "effect"
import * as GatewayConfig from "./GatewayConfig.ts"
import { server } from "./Server.ts"

const program = Effect.gen(function* () {
  const config = yield* GatewayConfig.GatewayConfig
  const run = Effect.gen(function* () {
    const dataDir = resolve(config.dataDir)
    if (yield* seedIfEmpty(dataDir, config.seedDir))
      yield* Effect.logInfo(`Seeded ${dataDir} with the example data`)
    yield* Effect.logInfo(`Data directory ${dataDir}; default model ${config.model}`)
    return yield* Layer.launch(server)
  })
  // One logger for everything: JSON lines when asked, else the readable one.
  return yield* run.pipe(Effect.provide(config.logFormat === "json" ? Logger.json : Logger.pretty))
}).pipe(Effect.provide(GatewayConfig.layer))

NodeRuntime.runMain(program, { disablePrettyLogger: true })
