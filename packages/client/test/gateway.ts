/**
 * A gateway for the client's tests, in this process: the gateway's app on a free port of
 * 127.0.0.1, over a copy of the example data, its local model answering (no upstream key). `close`
 * stops it and removes the copy.
 */
import { cpSync, mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as GatewayConfig from "@ctxo/gateway/GatewayConfig"
import { app } from "@ctxo/gateway/Server"
import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Layer, Logger, LogLevel, ManagedRuntime } from "effect"

const exampleData = fileURLToPath(new URL("../../../fixtures/data", import.meta.url))

export const startGateway = async (overrides: Partial<GatewayConfig.Settings> = {}) => {
  const dataDir = mkdtempSync(join(tmpdir(), "ctxo-client-"))
  const removeData = () => rmSync(dataDir, { recursive: true, force: true })
  try {
    cpSync(exampleData, dataDir, { recursive: true })
    const runtime = ManagedRuntime.make(
      app.pipe(
        Layer.provide(GatewayConfig.layerTest({ dataDir, ...overrides })),
        Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
        Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
      )
    )
    const address = (await runtime.runPromise(HttpServer.HttpServer)).address
    if (address._tag !== "TcpAddress") throw new Error("the gateway is not listening on TCP")
    return {
      dataDir,
      baseUrl: `http://127.0.0.1:${address.port}`,
      close: async () => {
        await runtime.dispose()
        removeData()
      }
    }
  } catch (e) {
    removeData()
    throw e
  }
}
