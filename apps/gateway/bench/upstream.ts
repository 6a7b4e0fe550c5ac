/**
 * The benchmark's upstream in a process of its own: the fake OpenAI-compatible model, answering
 * at once and keeping no request (kept, a run's requests grew it past 140 MB of heap by a session's
 * 800th turn, and its collections took the CPU the gateway's rows are timed on). Prints
 * `ready <base url>` when it listens; stops on SIGTERM.
 */
import { startFakeUpstream } from "@ctxo/agent/FakeUpstream"

const upstream = await startFakeUpstream({ keepRequests: false })
process.on("SIGTERM", () => void upstream.close().then(() => process.exit(0)))
console.log(`ready ${upstream.url}`)
