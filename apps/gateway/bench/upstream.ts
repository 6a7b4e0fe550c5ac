/**
 * The benchmark's upstream in a process of its own: the fake OpenAI-compatible model, answering
 * at once. Prints `ready <base url>` when it listens; stops on SIGTERM.
 */
import { startFakeUpstream } from "@ctxo/agent/FakeUpstream"

const upstream = await startFakeUpstream()
process.on("SIGTERM", () => void upstream.close().then(() => process.exit(0)))
console.log(`ready ${upstream.url}`)
