/**
 * Replaying many sessions for many profiles in this thread (see `Parallel` for worker threads):
 * loading session files, running replays,
 * checking every invariant, and the JSON and Markdown reports `ctxo replay` writes.
 */

import type { CompileResult } from "@ctxo/compiler/Compile"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Effect, Either } from "effect"
import type { ReplayEvidence, Violation, Where } from "./Invariants.ts"
import { check, formatViolation, INVARIANT_NUMBER, INVARIANTS } from "./Invariants.ts"
import type { Profile } from "./Replay.ts"
import { replaySession } from "./Replay.ts"
import type { RecordedSession } from "./Session.ts"
import { InvalidSession, parseSession } from "./Session.ts"

/** Session files from files and directories (`*.json` in a directory, sorted). */
export const loadSessions = (paths: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const files: Array<string> = []
    for (const p of paths) {
      const info = yield* fs
        .stat(p)
        .pipe(Effect.mapError(() => new InvalidSession({ file: p, reason: "no such file or directory" })))
      if (info.type === "Directory") {
        const entries = (yield* fs.readDirectory(p).pipe(Effect.orDie))
          .filter((f) => f.endsWith(".json"))
          .sort()
        files.push(...entries.map((f) => path.join(p, f)))
      } else files.push(p)
    }
    const sessions: Array<{ readonly file: string; readonly session: RecordedSession }> = []
    for (const file of files) {
      const text = yield* fs
        .readFileString(file)
        .pipe(Effect.mapError((e) => new InvalidSession({ file, reason: e.message })))
      const session = yield* Either.match(parseSession(text, file), {
        onLeft: Effect.fail,
        onRight: Effect.succeed
      })
      sessions.push({ file, session })
    }
    return sessions
  })

export interface RunResult {
  readonly evidence: ReadonlyArray<ReplayEvidence>
  readonly violations: ReadonlyArray<Violation>
  readonly sessions: number
  readonly profiles: ReadonlyArray<string>
  readonly compiles: number
  readonly refusals: number
  readonly compactions: number
  readonly seconds: number
}

export interface RunOptions {
  readonly sessions: ReadonlyArray<RecordedSession>
  readonly profiles: ReadonlyArray<Profile>
  /** Replays at once in this thread (they interleave; for parallelism see `Parallel.runParallel`). */
  readonly concurrency?: number
  readonly onDone?: (done: number, total: number) => Effect.Effect<void>
  readonly onCompiled?: (where: Where, result: CompileResult, window: number) => Effect.Effect<void>
}

/** Replays every session for every profile (sessions in parallel) and checks every invariant. */
export const runAll = (options: RunOptions) =>
  Effect.gen(function* () {
    const start = performance.now()
    const jobs = options.sessions.flatMap((session) =>
      options.profiles.map((profile) => ({ session, profile }))
    )
    let done = 0
    const evidence = yield* Effect.forEach(
      jobs,
      ({ session, profile }) =>
        replaySession(session, profile, options.onCompiled ? { onCompiled: options.onCompiled } : {}).pipe(
          Effect.tap(() => {
            done++
            return options.onDone?.(done, jobs.length) ?? Effect.void
          })
        ),
      { concurrency: options.concurrency ?? 4 }
    )
    return summarize(evidence, options, (performance.now() - start) / 1000)
  })

/** The evidence of every replay checked and counted. */
export const summarize = (
  evidence: ReadonlyArray<ReplayEvidence>,
  run: { readonly sessions: ReadonlyArray<RecordedSession>; readonly profiles: ReadonlyArray<Profile> },
  seconds: number
): RunResult => ({
  evidence,
  violations: evidence.flatMap((e) => check(e)),
  sessions: run.sessions.length,
  profiles: run.profiles.map((p) => p.id),
  compiles: evidence.reduce((n, e) => n + e.points.length, 0),
  refusals: evidence.reduce((n, e) => n + e.failures.filter((f) => f.refusal).length, 0),
  compactions: evidence.reduce((n, e) => n + e.compactions.length, 0),
  seconds
})

/** The JSON report: totals, per invariant, per session and profile, and every violation. */
export const jsonReport = (r: RunResult) => ({
  format: "ctxo.replay-report/v1",
  sessions: r.sessions,
  profiles: r.profiles,
  compiles: r.compiles,
  refusals: r.refusals,
  compactions: r.compactions,
  seconds: Number(r.seconds.toFixed(3)),
  sessionsPerSecond: Number(((r.sessions * r.profiles.length) / Math.max(r.seconds, 1e-9)).toFixed(2)),
  invariants: Object.fromEntries(
    INVARIANTS.map((name) => [name, r.violations.filter((v) => v.invariant === name).length])
  ),
  runs: r.evidence.map((e) => ({
    session: e.session,
    model: e.model,
    compiles: e.points.length,
    compactions: e.compactions.length,
    refusals: e.failures
      .filter((f) => f.refusal)
      .map((f) => ({ turn: f.turn, step: f.step, message: f.message })),
    violations: r.violations.filter((v) => v.session === e.session && v.model === e.model).length
  })),
  violations: r.violations
})

/** The Markdown report: a table per session and profile, then the violations. */
export const markdownReport = (r: RunResult): string => {
  const lines = [
    "# ctxo replay report",
    "",
    `${r.sessions} sessions × ${r.profiles.length} profiles (${r.profiles.join(", ")}): ${r.compiles} compiles, ${r.compactions} compactions, ${r.refusals} refusals (input over budget), ${r.violations.length} violations, ${r.seconds.toFixed(1)} s (${((r.sessions * r.profiles.length) / Math.max(r.seconds, 1e-9)).toFixed(1)} session replays per second).`,
    "",
    "| Invariant | Violations |",
    "| --- | ---: |",
    ...INVARIANTS.map(
      (name) =>
        `| ${INVARIANT_NUMBER[name]} ${name} | ${r.violations.filter((v) => v.invariant === name).length} |`
    ),
    "",
    "| Session | Model | Compiles | Compactions | Refusals | Violations |",
    "| --- | --- | ---: | ---: | ---: | ---: |",
    ...r.evidence.map(
      (e) =>
        `| ${e.session} | ${e.model} | ${e.points.length} | ${e.compactions.length} | ${e.failures.filter((f) => f.refusal).length} | ${r.violations.filter((v) => v.session === e.session && v.model === e.model).length} |`
    ),
    ""
  ]
  if (r.violations.length > 0)
    lines.push(
      "## Violations",
      "",
      ...r.violations.map((v) => `- ${formatViolation(v).replace(/\|/g, "\\|")}`),
      ""
    )
  return lines.join("\n")
}
