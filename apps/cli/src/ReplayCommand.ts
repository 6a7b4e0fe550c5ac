/**
 * `ctxo replay <files or dirs> [--models a,b] [--dump DIR] [--report FILE] [--concurrency N]`:
 * replays recorded sessions turn by turn for each model profile and checks the invariants of
 * design.md at every compile. Exit code 1 on any violation, each named with its session, turn,
 * model and invariant and an excerpt. Replays run on `--concurrency` worker threads.
 */
import { pathToFileURL } from "node:url"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import { dumpTo } from "@ctxo/replay/Dump"
import { formatViolation } from "@ctxo/replay/Invariants"
import { runParallel } from "@ctxo/replay/Parallel"
import type { Profile } from "@ctxo/replay/Replay"
import { defaultProfiles, live } from "@ctxo/replay/Replay"
import { jsonReport, loadSessions, markdownReport, runAll } from "@ctxo/replay/Run"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Console, Effect, Layer, Option } from "effect"

const paths = Args.path({ name: "sessions" }).pipe(
  Args.withDescription("Session files (ctxo.session/v1) or directories of them"),
  Args.atLeast(1)
)
const models = Options.text("models").pipe(
  Options.withDescription(
    `Model profiles, comma separated (default: ${defaultProfiles.map((p) => p.id).join(",")}); any registry model name works, Claude models render the Anthropic format`
  ),
  Options.optional
)
const dump = Options.directory("dump").pipe(
  Options.withDescription("Write DIR/<session>/<model>/turn-<k>.json for every compile"),
  Options.optional
)
const report = Options.file("report").pipe(
  Options.withDescription("Write the JSON report to FILE and the Markdown report beside it (FILE.md)"),
  Options.optional
)
const concurrency = Options.integer("concurrency").pipe(
  Options.withDescription(
    "Worker threads replaying in parallel (default 1: in this thread). Each worker starts its own runtime and tokenizers (about 2.5 s), so workers pay off for suites that take minutes on machines with cores to spare"
  ),
  Options.withDefault(1)
)
const modelsFile = Options.file("models-file", { exists: "yes" }).pipe(
  Options.withDescription("A JSON file of model overrides (the format of `ctxo models --models FILE`)"),
  Options.optional
)

export class ReplayFailed extends Error {
  readonly _tag = "ReplayFailed"
}

const profileOf = (name: string): Profile =>
  defaultProfiles.find((p) => p.id === name) ?? {
    id: name,
    model: name,
    format: /claude|anthropic/i.test(name) ? "anthropic" : "openai"
  }

export const replayCommand = Command.make(
  "replay",
  { paths, models, dump, report, concurrency, modelsFile },
  (args) =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const loaded = yield* loadSessions(args.paths)
      const sessions = loaded.map((l) => l.session)
      const profiles = Option.match(args.models, {
        onNone: () => defaultProfiles,
        onSome: (list) =>
          list
            .split(",")
            .map((s) => profileOf(s.trim()))
            .filter((p) => p.id !== "")
      })
      const tty = process.stderr.isTTY === true
      const progress = (done: number, total: number) => {
        if (!tty) return
        const width = 30
        const filled = Math.round((done / total) * width)
        process.stderr.write(
          `\r[${"#".repeat(filled)}${".".repeat(width - filled)}] ${done}/${total} replays`
        )
        if (done === total) process.stderr.write("\n")
      }
      const dumpDir = Option.getOrUndefined(args.dump)
      const modelsFiles = Option.isSome(args.modelsFile)
        ? [{ origin: args.modelsFile.value, text: yield* fs.readFileString(args.modelsFile.value) }]
        : []
      const result =
        args.concurrency > 1
          ? // Each worker is this script again, on its own thread (main.ts hands it to runReplayWorker).
            yield* runParallel({
              sessions,
              profiles,
              workers: args.concurrency,
              workerUrl: pathToFileURL(process.argv[1]!),
              modelsFiles,
              ...(dumpDir === undefined ? {} : { dump: dumpDir }),
              onDone: progress
            })
          : yield* runAll({
              sessions,
              profiles,
              onDone: (done, total) => Effect.sync(() => progress(done, total)),
              ...(dumpDir === undefined ? {} : { onCompiled: dumpTo(dumpDir) })
            }).pipe(
              Effect.provide(
                Layer.mergeAll(live, ModelRegistry.layerConfig(modelsFiles), Tokenizer.layer()).pipe(
                  Layer.orDie
                )
              )
            )
      const reportFile = Option.getOrUndefined(args.report)
      if (reportFile !== undefined) {
        yield* fs.makeDirectory(path.dirname(reportFile), { recursive: true })
        yield* fs.writeFileString(reportFile, `${JSON.stringify(jsonReport(result), null, 2)}\n`)
        yield* fs.writeFileString(`${reportFile.replace(/\.json$/, "")}.md`, markdownReport(result))
      }
      for (const v of result.violations) yield* Console.log(formatViolation(v))
      const perSecond = (result.sessions * result.profiles.length) / Math.max(result.seconds, 1e-9)
      yield* Console.log(
        `${result.sessions} sessions × ${result.profiles.length} profiles: ${result.compiles} compiles, ${result.compactions} compactions, ${result.refusals} refusals, ${result.violations.length} violations in ${result.seconds.toFixed(1)} s (${perSecond.toFixed(1)} replays/s)`
      )
      if (result.violations.length > 0)
        return yield* Effect.fail(new ReplayFailed(`${result.violations.length} invariant violations`))
    })
).pipe(
  Command.withDescription(
    "Replay recorded sessions for several models and check the invariants at every turn (exit 1 on a violation)"
  )
)
