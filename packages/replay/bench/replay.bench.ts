/**
 * Replaying every recorded session (fixtures/sessions) for every default profile, in one run at
 * --concurrency 1, 2 and 4: session replays per second, compiles per second, and the ratio of each
 * concurrency to 1 (the baseline). Replays are CPU-bound on one thread, so concurrency interleaves
 * them rather than adding cores: the ratio shows what it buys.
 */
import { fileURLToPath } from "node:url"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Layer, ManagedRuntime } from "effect"
import { defaultProfiles, live } from "../src/Replay.ts"
import { loadSessions, runAll } from "../src/Run.ts"

const runtime = ManagedRuntime.make(
  Layer.mergeAll(live, ModelRegistry.layer(), Tokenizer.layer(), NodeContext.layer)
)
const dir = fileURLToPath(new URL("../../../fixtures/sessions", import.meta.url))
const sessions = (await runtime.runPromise(loadSessions([dir]))).map((l) => l.session)
// Warm the encoders and the JIT once, not measured.
await runtime.runPromise(runAll({ sessions: sessions.slice(0, 2), profiles: defaultProfiles }))

const rows: Array<{ concurrency: number; seconds: number; replays: number; compiles: number }> = []
for (const concurrency of [1, 2, 4]) {
  const r = await runtime.runPromise(runAll({ sessions, profiles: defaultProfiles, concurrency }))
  if (r.violations.length > 0) throw new Error(`${r.violations.length} violations`)
  rows.push({
    concurrency,
    seconds: r.seconds,
    replays: r.sessions * r.profiles.length,
    compiles: r.compiles
  })
}
await runtime.dispose()
const base = rows[0]!
console.log(
  `${sessions.length} sessions × ${defaultProfiles.length} profiles (${base.replays} replays, ${base.compiles} compiles, each compiled twice)`
)
for (const r of rows)
  console.log(
    `concurrency ${r.concurrency}: ${r.seconds.toFixed(2)} s, ${(r.replays / r.seconds).toFixed(1)} replays/s, ${(r.compiles / r.seconds).toFixed(0)} compiles/s, ${(base.seconds / r.seconds).toFixed(2)}x concurrency 1`
  )
