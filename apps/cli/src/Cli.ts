import * as Command from "@effect/cli/Command"
import { blocksCommand } from "./BlocksCommand.ts"
import { countCommand, modelsCommand } from "./BudgetCommands.ts"
import { compileCommand, previewCommand } from "./CompileCommands.ts"
import { replayCommand } from "./ReplayCommand.ts"

export const ctxo = Command.make("ctxo").pipe(
  Command.withDescription("ctxo, the Context Orchestrator"),
  Command.withSubcommands([
    compileCommand,
    previewCommand,
    blocksCommand,
    countCommand,
    modelsCommand,
    replayCommand
  ])
)

export const run = Command.run(ctxo, { name: "ctxo", version: "0.1.0" })
