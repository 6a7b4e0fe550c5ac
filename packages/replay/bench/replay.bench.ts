/**
 * Replaying every recorded session (fixtures/sessions) for every default profile, side by side in
 * one run: in this thread (the baseline) and on 2 and 4 worker threads (`ctxo replay --concurrency`).
 * Reports session replays per second, compiles per second and each run's ratio to the baseline.
 * Worker runs include starting the workers (each loads the modules and its tokenizers).
 * With CTXO_BENCH_ROUNDS under 5 (CI's smoke run) it replays a third of the sessions, and says so.
 */
import { availableParallelism } from "node:os"
import { fileURLToPath } from "node:url"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Effect, Layer, ManagedRuntime } from "effect"
import { isReplayWorker, runParallel, runReplayWorker } from "../src/Parallel.ts"
import { defaultProfiles, live } from "../src/Replay.ts"
import { loadSessions, type RunResult, runAll } from "../src/Run.ts"

if (isReplayWorker()) {
  await runReplayWorker()
} else {
  const runtime = ManagedRuntime.make(
    Layer.mergeAll(live, ModelRegistry.layer(), Tokenizer.layer(), NodeContext.layer)
  )
  const dir = fileURLToPath(new URL("../../../fixtures/sessions", import.meta.url))
  const recorded = (await runtime.runPromise(loadSessions([dir]))).map((l) => l.session)
  const smoke = Number(process.env.CTXO_BENCH_ROUNDS ?? 5) < 5
  const sessions = smoke ? recorded.slice(0, Math.ceil(recorded.length / 3)) : recorded
  // Warm the encoders and the JIT of this thread once, not measured.
  await runtime.runPromise(runAll({ sessions: sessions.slice(0, 2), profiles: defaultProfiles }))

  const rows: Array<{ name: string; result: RunResult }> = []
  rows.push({
    name: "this thread",
    result: await runtime.runPromise(runAll({ sessions, profiles: defaultProfiles }))
  })
  for (const workers of [2, 4])
    rows.push({
      name: `${workers} workers`,
      result: await Effect.runPromise(
        runParallel({ sessions, profiles: defaultProfiles, workers, workerUrl: new URL(import.meta.url) })
      )
    })
  await runtime.dispose()
  for (const r of rows)
    if (r.result.violations.length > 0) throw new Error(`${r.name}: ${r.result.violations.length} violations`)
  const base = rows[0]!.result
  console.log(
    `${sessions.length} sessions × ${defaultProfiles.length} profiles (${base.sessions * base.profiles.length} replays, ${base.compiles} compiles, each compiled twice); ${availableParallelism()} CPUs${smoke ? `; smoke run (CTXO_BENCH_ROUNDS under 5): ${sessions.length} of the ${recorded.length} recorded sessions` : ""}`
  )
  for (const { name, result } of rows)
    console.log(
      `${name.padEnd(12)} ${result.seconds.toFixed(2)} s, ${((result.sessions * result.profiles.length) / result.seconds).toFixed(1)} replays/s, ${(result.compiles / result.seconds).toFixed(0)} compiles/s, ${(base.seconds / result.seconds).toFixed(2)}x this thread`
    )
}
