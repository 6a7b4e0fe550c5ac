/**
 * The floor of the gateway benchmark: a bare Node pass-through proxy, node:http in and an undici
 * keep-alive pool out, no parsing. Whatever a proxy must add at least (one more hop on this
 * machine) is what this one adds. Prints `ready <base url>` when it listens.
 */
import { createServer } from "node:http"
import { Pool } from "undici"

const upstream = new URL(process.env.UPSTREAM_URL ?? "")
const prefix = upstream.pathname.replace(/\/$/, "")
const pool = new Pool(upstream.origin, { connections: 128 })
const server = createServer((req, res) => {
  pool
    .request({
      method: "POST",
      path: `${prefix}${(req.url ?? "/").replace(/^\/v1/, "")}`,
      headers: { "content-type": req.headers["content-type"] ?? "application/json" },
      body: req
    })
    .then(
      ({ statusCode, headers, body }) => {
        res.writeHead(statusCode, { "content-type": String(headers["content-type"] ?? "") })
        body.pipe(res)
      },
      (e: Error) => {
        res.writeHead(502).end(e.message)
      }
    )
})
server.keepAliveTimeout = 60_000
server.listen(0, "127.0.0.1", () => {
  const address = server.address()
  console.log(`ready http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}/v1`)
})
process.on("SIGTERM", () => {
  server.close()
  void pool.close().then(() => process.exit(0))
})
