import * as Command from "@effect/cli/Command"
import { Console, Context, Effect } from "effect"
import { aggregateCommand, aggregateExamples } from "./AggregateCommand.ts"
import { blocksCommand, blocksExamples } from "./BlocksCommand.ts"
import { countCommand, countExamples, modelsCommand, modelsExamples } from "./BudgetCommands.ts"
import { compileCommand, compileExamples, previewCommand, previewExamples } from "./CompileCommands.ts"
import type { CommandHelp, Example } from "./internal/help.ts"
import { colorFor, commandName, renderCommandHelp, renderRootHelp, stripAnsi } from "./internal/help.ts"
import { mapCommand, mapExamples, mapSubcommands } from "./MapCommands.ts"
import { memoryCommand, memoryExamples, memorySubcommands } from "./MemoryCommands.ts"
import { replayCommand, replayExamples } from "./ReplayCommand.ts"
import { runCommand, runExamples } from "./RunCommand.ts"
import {
  sessionsCommand,
  sessionsExamples,
  sessionsSubcommands,
  tasksCommand,
  tasksExamples,
  tasksSubcommands
} from "./SessionCommands.ts"
import { storeCommand, storeExamples, storeSubcommands } from "./StoreCommands.ts"

const NAME = "ctxo"
const VERSION = "0.1.0"
const DESCRIPTION =
  "the Context Orchestrator: compile, inspect and replay the contexts of LLM calls; manage sessions and their tasks"

/** The console the commands print with: the process's own, whatever the CLI's output goes through. */
class CommandConsole extends Context.Tag("@ctxo/cli/CommandConsole")<CommandConsole, Console.Console>() {}

/** A command's handler prints through the process's console, untouched (file text stays byte for byte). */
const ownConsole = <N extends string, R, E, A>(command: Command.Command<N, R, E, A>) =>
  Command.transformHandler(command, (effect) =>
    Effect.flatMap(CommandConsole, (console) => Effect.withConsole(effect, console))
  )

const subcommands = [
  ownConsole(compileCommand),
  ownConsole(previewCommand),
  ownConsole(blocksCommand),
  ownConsole(countCommand),
  ownConsole(modelsCommand),
  ownConsole(replayCommand),
  ownConsole(sessionsCommand),
  ownConsole(tasksCommand),
  ownConsole(memoryCommand),
  ownConsole(aggregateCommand),
  ownConsole(mapCommand),
  ownConsole(runCommand),
  ownConsole(storeCommand)
] as const

const commands: ReadonlyArray<CommandHelp> = [
  { command: subcommands[0], examples: compileExamples },
  { command: subcommands[1], examples: previewExamples },
  { command: subcommands[2], examples: blocksExamples },
  { command: subcommands[3], examples: countExamples },
  { command: subcommands[4], examples: modelsExamples },
  { command: subcommands[5], examples: replayExamples },
  { command: subcommands[6], examples: sessionsExamples, subcommands: sessionsSubcommands },
  { command: subcommands[7], examples: tasksExamples, subcommands: tasksSubcommands },
  { command: subcommands[8], examples: memoryExamples, subcommands: memorySubcommands },
  { command: subcommands[9], examples: aggregateExamples },
  { command: subcommands[10], examples: mapExamples, subcommands: mapSubcommands },
  { command: subcommands[11], examples: runExamples },
  { command: subcommands[12], examples: storeExamples, subcommands: storeSubcommands }
]

const rootExamples: ReadonlyArray<Example> = [
  {
    says: "Compile the example session's next request (the default data root is ./data, the gateway's):",
    command: "ctxo compile --data fixtures/data --session code-agent-auth"
  },
  {
    says: "See its layers, tokens and cuts:",
    command: "ctxo preview --data fixtures/data --session code-agent-auth"
  },
  { says: "Count tokens for Claude:", command: "ctxo count fixtures/docs/profile.md -m claude-sonnet-4-5" },
  { says: "Check the invariants on every recorded session:", command: "ctxo replay fixtures/sessions" }
]

export const ctxo = Command.make(NAME).pipe(
  Command.withDescription(`ctxo, ${DESCRIPTION}`),
  Command.withSubcommands(subcommands)
)

export const run = Command.run(ctxo, { name: NAME, version: VERSION })

/** Root options that take a value (the library's built-ins), skipped when looking for the command. */
const VALUED = new Set(["--log-level", "--completions"])

export interface HelpRequest {
  readonly command?: string
  /** A subcommand of a command group (`ctxo tasks add --help`). */
  readonly subcommand?: string
}

/**
 * The help asked for, if any: `-h`/`--help` anywhere before `--`, for the first command named (and
 * its subcommand, right after it, for a command group); a bare `ctxo` is the root help too.
 * @effect/cli only sees `--help` before a command's own options.
 */
export const helpRequest = (args: ReadonlyArray<string>): HelpRequest | undefined => {
  const end = args.indexOf("--")
  const before = end === -1 ? args : args.slice(0, end)
  if (before.length > 0 && !before.includes("--help") && !before.includes("-h")) return undefined
  for (let i = 0; i < before.length; i++) {
    const arg = before[i]!
    if (VALUED.has(arg)) i++
    else if (!arg.startsWith("-")) {
      const command = commands.find((c) => commandName(c) === arg)
      if (command === undefined) return {}
      const next = before[i + 1]
      return command.subcommands?.some((s) => commandName(s) === next) === true
        ? { command: arg, subcommand: next! }
        : { command: arg }
    }
  }
  return {}
}

export const helpText = (request: HelpRequest, color: boolean, width = 80): string => {
  const command = commands.find((c) => commandName(c) === request.command)
  const sub = command?.subcommands?.find((s) => commandName(s) === request.subcommand)
  if (command === undefined)
    return renderRootHelp(
      { name: NAME, version: VERSION, description: DESCRIPTION },
      commands,
      rootExamples,
      {
        color,
        width
      }
    )
  return sub === undefined
    ? renderCommandHelp(NAME, command, { color, width })
    : renderCommandHelp(`${NAME} ${commandName(command)}`, sub, { color, width })
}

/** A console that drops ANSI escapes from what goes to a stream that is not to be colored. */
const plainConsole = (console: Console.Console, out: boolean, err: boolean): Console.Console => {
  const clean = (args: ReadonlyArray<unknown>) => args.map((a) => (typeof a === "string" ? stripAnsi(a) : a))
  return {
    ...console,
    log: (...args) => (out ? console.log(...clean(args)) : console.log(...args)),
    info: (...args) => (out ? console.info(...clean(args)) : console.info(...args)),
    error: (...args) => (err ? console.error(...clean(args)) : console.error(...args)),
    warn: (...args) => (err ? console.warn(...clean(args)) : console.warn(...args)),
    unsafe: {
      ...console.unsafe,
      log: (...args) => (out ? console.unsafe.log(...clean(args)) : console.unsafe.log(...args)),
      error: (...args) => (err ? console.unsafe.error(...clean(args)) : console.unsafe.error(...args))
    }
  }
}

/**
 * `ctxo` on a command line (`argv` as Node gives it). Help is ctxo's own (plain off a terminal and
 * with NO_COLOR); everything else is @effect/cli's, its messages without ANSI escapes where the
 * stream is not colored, the commands' own output untouched.
 */
export const main = (argv: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const args = argv.slice(2)
    const help = helpRequest(args)
    const colorOut = colorFor(process.stdout)
    if (help !== undefined) {
      const width =
        process.stdout.isTTY === true ? Math.min(Math.max(process.stdout.columns ?? 80, 60), 100) : 80
      return yield* Console.log(helpText(help, colorOut, width))
    }
    if (args.includes("--models-file"))
      return yield* Effect.fail(
        new Error("--models-file is now --models FILE (a JSON file of model overrides, in every command)")
      )
    const console = yield* Effect.console
    return yield* run(argv).pipe(
      Effect.withConsole(plainConsole(console, !colorOut, !colorFor(process.stderr))),
      Effect.provideService(CommandConsole, console)
    )
  })
