/**
 * What `NodeHttpServer.layerTest` is, for the gateway's server: it listens on a free port of
 * 127.0.0.1 with its lane, and an `HttpClient` sends requests to it (the gateway's tests, the eval
 * gate's gateway suite). A module of its own: the client is @effect/platform-node's
 * `NodeHttpClient` (over node:http), whose modules import undici, and the gateway's bundle leaves
 * undici out of its start only while nothing the start imports keeps them.
 */
import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Layer } from "effect"
import { listening } from "./Server.ts"

export const layerTest = HttpServer.layerTestClient.pipe(
  Layer.provide(NodeHttpClient.layerWithoutAgent),
  Layer.provide(NodeHttpClient.makeAgentLayer({ keepAlive: false })),
  Layer.provideMerge(listening({ port: 0, host: "127.0.0.1" }))
)
