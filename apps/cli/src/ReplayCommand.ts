/**
 * `ctxo replay <files or dirs> [--models a,b] [--dump DIR] [--report FILE] [--concurrency N]`:
 * replays recorded sessions turn by turn for each model profile and checks the invariants of
 * design.md at every compile. Exit code 1 on any violation, each named with its session, turn,
 * model and invariant and an excerpt.
 */
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import type { CompileResult } from "@ctxo/compiler/Compile"
import { chatMessagesOf } from "@ctxo/compiler/Compile"
import type { Where } from "@ctxo/replay/Invariants"
import { formatViolation } from "@ctxo/replay/Invariants"
import type { Profile } from "@ctxo/replay/Replay"
import { defaultProfiles, live } from "@ctxo/replay/Replay"
import { jsonReport, loadSessions, markdownReport, runAll } from "@ctxo/replay/Run"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Console, Effect, Layer, Option } from "effect"
import { modelsFile, registryLayer } from "./internal/models.ts"

const paths = Args.path({ name: "sessions" }).pipe(
  Args.withDescription("Session files (ctxo.session/v1) or directories of them"),
  Args.atLeast(1)
)
const profiles = Options.text("profiles").pipe(
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
  Options.withDescription("Session replays run at once (default 4)"),
  Options.withDefault(4)
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

/** The message index range of each layer in the rendered request (what `--dump` writes). */
const layerRanges = (result: CompileResult) => {
  const messages = chatMessagesOf(result.request as never, result.format)
  if (result.format !== "openai")
    return result.composition.layers.map((l) => ({ name: l.id, from: 0, to: messages.length - 1 }))
  let at = 0
  return result.composition.layers.map((l) => {
    const size =
      l._tag === "history"
        ? l.messages.reduce(
            (n, m) => n + (m.role === "tool" ? m.parts.filter((p) => p._tag === "tool-result").length : 1),
            0
          )
        : 1
    const range = { name: l.id, from: at, to: at + size - 1 }
    at += size
    return range
  })
}

export const replayCommand = Command.make(
  "replay",
  { paths, profiles, dump, report, concurrency, models: modelsFile },
  (args) =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const loaded = yield* loadSessions(args.paths)
      const chosen = Option.match(args.profiles, {
        onNone: () => defaultProfiles,
        onSome: (list) =>
          list
            .split(",")
            .map((s) => profileOf(s.trim()))
            .filter((p) => p.id !== "")
      })
      const tty = process.stderr.isTTY === true
      const progress = (done: number, total: number) =>
        Effect.sync(() => {
          if (!tty) return
          const width = 30
          const filled = Math.round((done / total) * width)
          process.stderr.write(
            `\r[${"#".repeat(filled)}${".".repeat(width - filled)}] ${done}/${total} replays`
          )
          if (done === total) process.stderr.write("\n")
        })
      const dumpDir = Option.getOrUndefined(args.dump)
      const onCompiled = dumpDir
        ? (where: Where, result: CompileResult, window: number) =>
            Effect.gen(function* () {
              const dir = path.join(dumpDir, where.session, where.model)
              yield* fs.makeDirectory(dir, { recursive: true })
              const name = `turn-${where.turn}${where.step > 0 ? `-step-${where.step}` : ""}${where.phase === "retry" ? "-retry" : ""}.json`
              yield* fs.writeFileString(
                path.join(dir, name),
                `${JSON.stringify(
                  {
                    request: result.request,
                    layers: layerRanges(result),
                    tokens: result.report.total,
                    window,
                    reserve: result.report.outputReserve
                  },
                  null,
                  2
                )}\n`
              )
            }).pipe(Effect.orDie)
        : undefined
      const result = yield* runAll({
        sessions: loaded.map((l) => l.session),
        profiles: chosen,
        concurrency: args.concurrency,
        onDone: progress,
        ...(onCompiled ? { onCompiled } : {})
      })
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
    }).pipe(
      Effect.provide(Layer.mergeAll(live, registryLayer(args.models), Tokenizer.layer()).pipe(Layer.orDie))
    )
).pipe(
  Command.withDescription(
    "Replay recorded sessions for several models and check the invariants at every turn (exit 1 on a violation)"
  )
)
