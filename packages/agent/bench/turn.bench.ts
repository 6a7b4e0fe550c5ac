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
 * p50 and p99 of each, and the turn's ratio to the floor. Then where a turn's time goes: split at
 * the model's call (before it, the call, after it), and the same turns of a second session warmed
 * to 20 turns only (interleaved in the same rounds), which shows how much of a turn grows with the
 * history and how much every turn pays whatever its length. Last, by stage: the same turns of a
 * third session warmed to 200 turns and run traced (interleaved too), each stage's time in a turn
 * from its span (the gateway's traces have the same spans; tracing costs a little of each).
 * Then the collector over more turns of the first session. Last, V8's allocation-site pretenuring,
 * which the gateway turns off (`V8Tuning`), against V8's default: child processes doing the same
 * (a session warmed the same way, the turns the first session had, then the collector's turns
 * timed), one of each in turn, which goes first alternating. This process runs the V8 flags the
 * gateway would, set before the sessions are made.
 */
import { spawn } from "node:child_process"
import { constants, PerformanceObserver, performance } from "node:perf_hooks"
import { fileURLToPath } from "node:url"
import * as V8Tuning from "../src/V8Tuning.ts"
import { makeWarmSession } from "./warmSession.ts"

/** Set in a child process (`pretenuringRun`): "on" keeps V8's allocation-site pretenuring, "off" as the gateway. */
const PRETENURING_CHILD = "CTXO_TURN_BENCH_PRETENURING"
const child = process.env[PRETENURING_CHILD]
V8Tuning.apply({ allocationSitePretenuring: child === "on" })

const rounds = Math.max(1, Number(process.env.CTXO_BENCH_ROUNDS ?? 5))
const PER_ROUND = 60
const WARM_TURNS = 200
const SHORT_TURNS = 20
/** The collector's turns (after the rounds' turns of the same session). */
const GC_TURNS = rounds * 60

const quantile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}
const timed = async (f: () => Promise<unknown>, into: Array<number>) => {
  const start = performance.now()
  await f()
  into.push(performance.now() - start)
}

const ms = (n: number) => `${n.toFixed(2)} ms`

interface CollectorRun {
  /** Each turn's time (ms). */
  readonly turns: ReadonlyArray<number>
  /** The pauses V8 reported while they ran (ms), scavenges and full collections. */
  readonly minor: ReadonlyArray<number>
  readonly major: ReadonlyArray<number>
}
/** `count` timed turns, and every pause V8 reports while they run. */
const collectorRun = async (turn: () => Promise<unknown>, count: number): Promise<CollectorRun> => {
  const out = { turns: [] as Array<number>, minor: [] as Array<number>, major: [] as Array<number> }
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = (entry as { readonly detail?: { readonly kind?: number } }).detail?.kind
      if (kind === constants.NODE_PERFORMANCE_GC_MINOR) out.minor.push(entry.duration)
      else if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) out.major.push(entry.duration)
    }
  })
  observer.observe({ entryTypes: ["gc"] })
  for (let i = 0; i < count; i++) await timed(turn, out.turns)
  await new Promise((resolve) => setTimeout(resolve, 20))
  observer.disconnect()
  return out
}
const pauseRow = (list: ReadonlyArray<number>, turns: number) =>
  list.length === 0
    ? "none"
    : `${((100 * list.length) / turns).toFixed(1)} per 100 turns, pause p50 ${ms(quantile(list, 0.5))}, max ${ms(Math.max(...list))}`

if (child !== undefined) {
  // A child: a session as the first one is at the collector's turns, then those turns; its answer
  // is its last line of output, in JSON.
  const session = await makeWarmSession(WARM_TURNS)
  for (let i = 0; i < rounds * PER_ROUND; i++) await session.turn()
  const run = await collectorRun(session.turn, GC_TURNS)
  await session.dispose()
  process.stdout.write(`${JSON.stringify(run)}\n`, () => process.exit(0))
} else await main()

/** This bench in a child process, with V8's allocation-site pretenuring on (its default) or off. */
async function pretenuringRun(pretenuring: "on" | "off") {
  return new Promise<CollectorRun>((resolve, reject) => {
    const spawned = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url)], {
      env: { ...process.env, [PRETENURING_CHILD]: pretenuring },
      stdio: ["ignore", "pipe", "inherit"]
    })
    let out = ""
    spawned.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString()
    })
    spawned.once("error", reject)
    spawned.once("close", (code, signal) => {
      const last = out.trim().split("\n").at(-1) ?? ""
      try {
        if (code !== 0) throw new Error(`it exited with ${code ?? signal}`)
        resolve(JSON.parse(last) as CollectorRun)
      } catch (e) {
        reject(
          new Error(
            `the turn bench's child with pretenuring ${pretenuring}: ${e instanceof Error ? e.message : String(e)}`
          )
        )
      }
    })
  })
}

async function main() {
  const { turn, phases, compile, floor, messages: messageCount, dispose } = await makeWarmSession(WARM_TURNS)
  const short = await makeWarmSession(SHORT_TURNS)
  const traced = await makeWarmSession(WARM_TURNS, { stages: true })
  traced.clearStages()

  const turns: Array<number> = []
  const floors: Array<number> = []
  const compiles: Array<number> = []
  const shortTurns: Array<number> = []
  /** The messages in each timed turn's request, of either session (both grow as they are timed). */
  const sizes: Array<number> = []
  const shortSizes: Array<number> = []
  const split = { before: [] as Array<number>, model: [] as Array<number>, after: [] as Array<number> }
  /** Each stage's time in each traced turn (the sum of its spans in that turn), by the span's name. */
  const stages = new Map<string, Array<number>>()
  let turnCpu = 0
  for (let r = 0; r < rounds; r++)
    for (let i = 0; i < PER_ROUND; i++) {
      const cpu = process.cpuUsage()
      await timed(turn, turns)
      const used = process.cpuUsage(cpu)
      turnCpu += (used.user + used.system) / 1000
      sizes.push(messageCount())
      const { before, model, after } = phases()
      split.before.push(before)
      split.model.push(model)
      split.after.push(after)
      await timed(floor, floors)
      await timed(compile, compiles)
      await timed(short.turn, shortTurns)
      shortSizes.push(short.messages())
      await traced.turn()
      for (const [name, total] of traced.stages()) {
        const list = stages.get(name)
        if (list === undefined) stages.set(name, [total])
        else list.push(total)
      }
      traced.clearStages()
    }
  const messages = messageCount()
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
  console.log(
    `  where the turn goes (p50 of each part): before the model's call (lock, history, input recorded, compile) ${ms(quantile(split.before, 0.5))}; the call (the request serialized) ${ms(quantile(split.model, 0.5))}; after it (answer recorded and made durable, memory promoted, lock released) ${ms(quantile(split.after, 0.5))}`
  )
  // The line through the two medians: each session's median turn against its median request size.
  const longer = quantile(turns, 0.5) - quantile(shortTurns, 0.5)
  const size = quantile(sizes, 0.5)
  const gap = size - quantile(shortSizes, 0.5)
  const perMessage = longer / Math.max(1, gap)
  console.log(
    `  the same turns in a session warmed to ${SHORT_TURNS} turns instead (${gap} messages fewer all along; medians ${quantile(shortSizes, 0.5)} and ${size} messages a request) p50 ${ms(quantile(shortTurns, 0.5))}, ${(quantile(shortTurns, 0.5) / quantile(turns, 0.5)).toFixed(2)}x: a message of history costs a turn ${(perMessage * 1000).toFixed(2)} µs, and a turn pays about ${ms(quantile(turns, 0.5) - perMessage * size)} whatever its history (a straight line through the two medians)`
  )
  // By stage: p50 of each stage's time in a traced turn (a stage not in every turn: its p50 over the turns it ran in).
  const stage = (name: string) => {
    const list = stages.get(name)
    return list === undefined ? 0 : quantile(list, 0.5)
  }
  const tracedTurn = stage("TurnEngine.turn")
  const top = [
    "Store.lock",
    "Compaction.compact",
    "Recorder.startTurn",
    "Compiler.compile",
    "Recorder.endTurn"
  ]
  const inCompile = [
    "Compiler.resolveSources",
    "Compiler.mergeReferences",
    "Compiler.collect",
    "Compiler.selectBlocks",
    "Compiler.format",
    "Compiler.emit"
  ]
  const part = (name: string) =>
    `${name.replace(/^\w+\./, "")} ${ms(stage(name))} (${((100 * stage(name)) / tracedTurn).toFixed(0)}%)`
  console.log(
    `  by stage (the same turns of a third session warmed to ${WARM_TURNS}, traced; p50 of each stage's time in a turn): turn ${ms(tracedTurn)}; ${top.map(part).join(", ")}; the rest (the model's call, the wait for the input's fdatasync after the compile, memory promoted, the history's reads, the runtime between stages) ${ms(tracedTurn - top.reduce((n, name) => n + stage(name), 0))}`
  )
  console.log(`    the compile's stages: ${inCompile.map(part).join(", ")}`)

  // The collector: the main session's turns alone, every pause V8 reports while they run (a turn's
  // objects that outlive it are copied by the next scavenge and promoted by the one after: what a
  // scavenge pauses for, and what fills the old space the full collections sweep).
  const gc = await collectorRun(turn, GC_TURNS)
  console.log(
    `  the collector over ${GC_TURNS} more turns of the first session alone (p50 ${ms(quantile(gc.turns, 0.5))}, p99 ${ms(quantile(gc.turns, 0.99))}): scavenges ${pauseRow(gc.minor, GC_TURNS)}; full collections ${pauseRow(gc.major, GC_TURNS)}`
  )
  // V8's allocation-site pretenuring against off, as the gateway runs: child processes doing the
  // same, one of each in turn (a flag is the process's), which goes first alternating.
  const pairs = rounds >= 5 ? 2 : 1
  const runs = { on: [] as Array<CollectorRun>, off: [] as Array<CollectorRun> }
  for (let p = 0; p < pairs; p++)
    for (const setting of p % 2 === 0 ? (["off", "on"] as const) : (["on", "off"] as const))
      runs[setting].push(await pretenuringRun(setting))
  const pooled = (list: ReadonlyArray<CollectorRun>) => ({
    turns: list.flatMap((r) => r.turns),
    minor: list.flatMap((r) => r.minor),
    major: list.flatMap((r) => r.major)
  })
  const on = pooled(runs.on)
  const off = pooled(runs.off)
  const turnsEach = GC_TURNS * pairs
  const row = (r: CollectorRun) =>
    `p50 ${ms(quantile(r.turns, 0.5))}, p99 ${ms(quantile(r.turns, 0.99))}; scavenges ${pauseRow(r.minor, turnsEach)}; full collections ${pauseRow(r.major, turnsEach)}`
  console.log(
    `  V8's allocation-site pretenuring, ${pairs} process${pairs === 1 ? "" : "es"} each (a session warmed to ${WARM_TURNS}, ${rounds * PER_ROUND} turns, then ${GC_TURNS} timed): off, as the gateway runs, ${row(off)}`
  )
  console.log(
    `    on (V8's default) ${row(on)}; off is ${(quantile(off.turns, 0.5) / quantile(on.turns, 0.5)).toFixed(2)}x its p50 and ${(quantile(off.turns, 0.99) / quantile(on.turns, 0.99)).toFixed(2)}x its p99`
  )
  await traced.dispose()
  await short.dispose()
  await dispose()
}
