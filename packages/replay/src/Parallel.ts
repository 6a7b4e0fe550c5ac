/**
 * Replays on worker threads: each worker builds its own runtime (tokenizers included) and takes the
 * next (session, profile) job as it frees up, so replays use every core. Results come back in job
 * order, the same as `runAll` in one thread.
 *
 * The worker is the caller's own entry module (`workerUrl`), which must call `runReplayWorker()`
 * when it is not the main thread: a bundled CLI and a tsx-run script work the same way.
 */
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { pathToFileURL } from "node:url"
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import { Effect, Layer } from "effect"
import { dumpTo } from "./Dump.ts"
import type { ReplayEvidence } from "./Invariants.ts"
import type { Profile } from "./Replay.ts"
import { live, replaySession } from "./Replay.ts"
import { type RunResult, summarize } from "./Run.ts"
import type { RecordedSession } from "./Session.ts"

interface WorkerInput {
  readonly ctxoReplayWorker: true
  readonly sessions: ReadonlyArray<RecordedSession>
  readonly profiles: ReadonlyArray<Profile>
  readonly dump?: string
  /** Model override files (as `ctxo --models` reads them); CTXO_MODELS applies too. */
  readonly modelsFiles?: ReadonlyArray<{ readonly origin: string; readonly text: string }>
}
type ToWorker =
  | { readonly job: number; readonly session: number; readonly profile: number }
  | { readonly stop: true }
type FromWorker =
  | { readonly ready: true }
  | { readonly job: number; readonly evidence: ReplayEvidence }
  | { readonly job: number; readonly error: string }

/** True in a worker started by `runParallel`. */
export const isReplayWorker = () =>
  !isMainThread && (workerData as Partial<WorkerInput> | undefined)?.ctxoReplayWorker === true

/** The worker's loop: replay each job it is sent, post the evidence back. */
export const runReplayWorker = async () => {
  const input = workerData as WorkerInput
  const port = parentPort!
  const layer = Layer.mergeAll(live, ModelRegistry.layerConfig(input.modelsFiles ?? []), Tokenizer.layer())
  const runtime = (await import("effect")).ManagedRuntime.make(layer)
  port.on("message", async (message: ToWorker) => {
    if ("stop" in message) {
      await runtime.dispose()
      port.close()
      return
    }
    const replay = replaySession(
      input.sessions[message.session]!,
      input.profiles[message.profile]!,
      input.dump === undefined ? {} : { onCompiled: dumpTo(input.dump) }
    )
    try {
      const evidence = await runtime.runPromise(replay)
      port.postMessage({ job: message.job, evidence } satisfies FromWorker)
    } catch (e) {
      port.postMessage({
        job: message.job,
        error: e instanceof Error ? e.message : String(e)
      } satisfies FromWorker)
    }
  })
  port.postMessage({ ready: true } satisfies FromWorker)
}

/**
 * A worker on `url`. A TypeScript entry (a tsx-run script) gets tsx registered in the worker
 * first: loader hooks of the main thread do not reach worker threads.
 */
const startWorker = (url: URL, input: WorkerInput) => {
  if (!url.pathname.endsWith(".ts")) return new Worker(url, { workerData: input })
  const tsx = join(dirname(createRequire(url).resolve("tsx/package.json")), "dist/esm/api/index.mjs")
  const boot = `import(${JSON.stringify(pathToFileURL(tsx).href)}).then((m) => { m.register(); return import(${JSON.stringify(url.href)}) })`
  return new Worker(boot, { eval: true, workerData: input })
}

export interface ParallelOptions {
  readonly sessions: ReadonlyArray<RecordedSession>
  readonly profiles: ReadonlyArray<Profile>
  readonly workers: number
  readonly workerUrl: URL
  readonly dump?: string
  readonly modelsFiles?: ReadonlyArray<{ readonly origin: string; readonly text: string }>
  readonly onDone?: (done: number, total: number) => void
}

export class ReplayWorkerError extends Error {
  readonly _tag = "ReplayWorkerError"
}

/** Runs every (session, profile) replay on `workers` threads; the same result as `runAll`. */
export const runParallel = (options: ParallelOptions): Effect.Effect<RunResult, ReplayWorkerError> =>
  Effect.async<RunResult, ReplayWorkerError>((resume) => {
    const start = performance.now()
    const jobs = options.sessions.flatMap((_, s) =>
      options.profiles.map((__, p) => ({ session: s, profile: p }))
    )
    const results: Array<ReplayEvidence | undefined> = jobs.map(() => undefined)
    let next = 0
    let done = 0
    let failed = false
    const input: WorkerInput = {
      ctxoReplayWorker: true,
      sessions: options.sessions,
      profiles: options.profiles,
      ...(options.dump === undefined ? {} : { dump: options.dump }),
      ...(options.modelsFiles === undefined ? {} : { modelsFiles: options.modelsFiles })
    }
    const count = Math.max(1, Math.min(options.workers, jobs.length))
    const workers = Array.from({ length: count }, () => startWorker(options.workerUrl, input))
    const finish = (error?: string) => {
      if (failed) return
      for (const w of workers) w.postMessage({ stop: true } satisfies ToWorker)
      if (error !== undefined) {
        failed = true
        for (const w of workers) void w.terminate()
        resume(Effect.fail(new ReplayWorkerError(error)))
        return
      }
      resume(
        Effect.succeed(
          summarize(results as Array<ReplayEvidence>, options, (performance.now() - start) / 1000)
        )
      )
    }
    const feed = (worker: Worker) => {
      if (next >= jobs.length) return
      const job = next++
      worker.postMessage({ job, ...jobs[job]! } satisfies ToWorker)
    }
    for (const worker of workers) {
      worker.on("message", (message: FromWorker) => {
        if ("ready" in message) return feed(worker)
        if ("error" in message) return finish(message.error)
        results[message.job] = message.evidence
        done++
        options.onDone?.(done, jobs.length)
        if (done === jobs.length) finish()
        else feed(worker)
      })
      worker.on("error", (e) => finish(e.message))
    }
    if (jobs.length === 0) finish()
    return Effect.sync(() => {
      for (const w of workers) void w.terminate()
    })
  })
