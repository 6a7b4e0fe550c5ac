/**
 * The benchmark's upstream in a process of its own: the fake OpenAI-compatible model, answering
 * at once and keeping no request (kept, a run's requests grew it past 140 MB of heap by a session's
 * 800th turn, collected on the CPUs the gateway is timed on). It notes when it had read and parsed
 * each request (milliseconds of `process.hrtime`, the monotonic clock every process of the machine
 * shares, as the bench's notes are), the last 1,000, served as a JSON array at the `reads` URL:
 * where a session's turn is when the upstream has it. Prints `reads <url>` and then
 * `ready <base url>` when it listens; stops on SIGTERM.
 */
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { startFakeUpstream } from "@ctxo/agent/FakeUpstream"

const reads: Array<number> = []
const upstream = await startFakeUpstream({
  keepRequests: false,
  onRequest: () => {
    reads.push(Number(process.hrtime.bigint()) / 1e6)
    if (reads.length > 2_000) reads.splice(0, 1_000)
  }
})
const readsServer = createServer((_req, res) => {
  res.writeHead(200, { "content-type": "application/json" })
  res.end(JSON.stringify(reads.slice(-1_000)))
})
await new Promise<void>((resolve) => readsServer.listen(0, "127.0.0.1", resolve))
process.on("SIGTERM", () => {
  readsServer.close()
  void upstream.close().then(() => process.exit(0))
})
console.log(`reads http://127.0.0.1:${(readsServer.address() as AddressInfo).port}/`)
console.log(`ready ${upstream.url}`)
