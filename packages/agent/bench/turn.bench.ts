/**
 * A warm session's turn in one process (`TurnEngine.turn`): the gateway's session row without HTTP
 * and the upstream, so what the engine itself costs shows apart from the network and the model.
 * A turn records the input (a journal append, made durable with fdatasync while the first request
 * compiles), compiles the session's context, hands the request to a model that answers at once
 * (serializing it, as the gateway does before sending it), records the answer (an append and its
 * fdatasync) and promotes what matters to memory. Side by side, in the same rounds:
 *   floor:   what any durable turn of this session must do: two journal-sized appends, each made
 *            durable with fdatasync (through the thread pool, as the store does), and the compiled
 *            request serialized; no compile, no Effect;
 *   compile: the session's warm compile alone (the engine's preview: its lock, its history, one
 *            compile with the previous cut).
 * The session and its engine: `warmSession.ts`. It is warmed to 200 turns, then each of
 * `CTXO_BENCH_ROUNDS` rounds (default 5) times 60 turns, 60 floors and 60 compiles, interleaved.
 * p50 and p99 of each, and the turn's ratio to the floor.
 */
import { performance } from "node:perf_hooks"
import { makeWarmSession } from "./warmSession.ts"

const rounds = Math.max(1, Number(process.env.CTXO_BENCH_ROUNDS ?? 5))
const PER_ROUND = 60
const WARM_TURNS = 200

const quantile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}
const timed = async (f: () => Promise<unknown>, into: Array<number>) => {
  const start = performance.now()
  await f()
  into.push(performance.now() - start)
}

const { turn, compile, floor, messages: messageCount, dispose } = await makeWarmSession(WARM_TURNS)

const turns: Array<number> = []
const floors: Array<number> = []
const compiles: Array<number> = []
let turnCpu = 0
for (let r = 0; r < rounds; r++)
  for (let i = 0; i < PER_ROUND; i++) {
    const cpu = process.cpuUsage()
    await timed(turn, turns)
    const used = process.cpuUsage(cpu)
    turnCpu += (used.user + used.system) / 1000
    await timed(floor, floors)
    await timed(compile, compiles)
  }
const messages = messageCount()
const ms = (n: number) => `${n.toFixed(2)} ms`
console.log(
  `turn bench: ${turns.length} turns of a session warmed to ${WARM_TURNS} (${messages} messages in its request at the end), interleaved with the floor and the compile; Node ${process.version}`
)
console.log(
  `  engine turn (record, compile, model stub, record, promote)  p50 ${ms(quantile(turns, 0.5))}, p99 ${ms(quantile(turns, 0.99))}, process CPU ${ms(turnCpu / turns.length)} a turn (all threads)`
)
console.log(
  `  floor (2 appends + fdatasync, the request serialized)        p50 ${ms(quantile(floors, 0.5))}, p99 ${ms(quantile(floors, 0.99))}`
)
console.log(
  `  compile alone (the engine's preview of the next turn)       p50 ${ms(quantile(compiles, 0.5))}, p99 ${ms(quantile(compiles, 0.99))}`
)
console.log(
  `  the turn is ${(quantile(turns, 0.5) / quantile(floors, 0.5)).toFixed(2)}x the floor at p50; it adds ${ms(quantile(turns, 0.5) - quantile(floors, 0.5))} to it (goal of the gateway's session row: 2 ms added over direct)`
)
await dispose()
