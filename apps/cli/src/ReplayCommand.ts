/**
 * `ctxo replay <files or dirs> [--profiles a,b] [--models FILE] [--dump DIR] [--report FILE] [--concurrency N]`:
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
import type { Example } from "./internal/help.ts"
import { modelsFileOption } from "./internal/models.ts"

const paths = Args.path({ name: "sessions" }).pipe(
  Args.withDescription(
    "Recorded session files (ctxo.session/v1 JSON) or directories of them (every .json inside)."
  ),
  Args.atLeast(1)
)
const profiles = Options.text("profiles").pipe(
  Options.withPseudoName("LIST"),
  Options.withDescription(
    `The model profiles to replay each session for, comma separated. Defaults to ${defaultProfiles.map((p) => p.id).join(",")}. Any registry model name works; Claude models render the Anthropic format, the rest OpenAI's.`
  ),
  Options.optional
)
const dump = Options.directory("dump").pipe(
  Options.withPseudoName("DIR"),
  Options.withDescription(
    "Write every compiled request to DIR/<session>/<model>/turn-<k>[-step-<s>][-retry].json (request, layers, tokens, window, reserve)."
  ),
  Options.optional
)
const report = Options.file("report").pipe(
  Options.withPseudoName("FILE"),
  Options.withDescription(
    "Write the JSON report (every run, its compiles, compactions, refusals and violations) to FILE and the Markdown report beside it (FILE without .json, plus .md)."
  ),
  Options.optional
)
const concurrency = Options.integer("concurrency").pipe(
  Options.withPseudoName("N"),
  Options.withDescription(
    "Worker threads replaying in parallel. Defaults to 1: in this thread. Each worker starts its own runtime and tokenizers (about 2.5 s), so workers pay off for suites that take minutes on machines with cores to spare."
  ),
  Options.withDefault(1)
)
const modelsFile = modelsFileOption(
  "To choose the models to replay for, use --profiles gpt-4o,claude-sonnet-4-5."
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
  { paths, profiles, models: modelsFile, dump, report, concurrency },
  (args) =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const loaded = yield* loadSessions(args.paths)
      const sessions = loaded.map((l) => l.session)
      const chosen = Option.match(args.profiles, {
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
      const modelsFiles = Option.isSome(args.models)
        ? [{ origin: args.models.value, text: yield* fs.readFileString(args.models.value) }]
        : []
      const result =
        args.concurrency > 1
          ? // Each worker is this script again, on its own thread (main.ts hands it to runReplayWorker).
            yield* runParallel({
              sessions,
              profiles: chosen,
              workers: args.concurrency,
              workerUrl: pathToFileURL(process.argv[1]!),
              modelsFiles,
              ...(dumpDir === undefined ? {} : { dump: dumpDir }),
              onDone: progress
            })
          : yield* runAll({
              sessions,
              profiles: chosen,
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
    "Replay recorded sessions turn by turn for several model profiles and check the context invariants at every compile. Prints each violation (session, turn, model, invariant, excerpt) and a summary; exits 1 on any violation."
  )
)

export const replayExamples: ReadonlyArray<Example> = [
  { says: "Every recorded session, for the default profiles:", command: "ctxo replay fixtures/sessions" },
  {
    says: "One session for gpt-4o only, dumping every compiled request and writing the reports:",
    command:
      "ctxo replay fixtures/sessions/crash-and-retry.json --profiles gpt-4o --dump /tmp/dump --report /tmp/replay/report.json"
  },
  {
    says: "A custom model defined in a models file, on 4 worker threads:",
    command: "ctxo replay fixtures/sessions --profiles acme/small --models models.json --concurrency 4"
  }
]
