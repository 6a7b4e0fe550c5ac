import { isReplayWorker, runReplayWorker } from "@ctxo/replay/Parallel"
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Console, Effect } from "effect"
import { main } from "./Cli.ts"

// `ctxo replay --concurrency N` starts this script again on worker threads.
if (isReplayWorker()) void runReplayWorker()
else
  main(process.argv).pipe(
    // @effect/cli prints its own usage errors; everything else is reported once, as one line.
    Effect.tapError((error) =>
      ValidationError.isValidationError(error) ? Effect.void : Console.error(`ctxo: ${error.message}`)
    ),
    Effect.provide(NodeContext.layer),
    (program) => NodeRuntime.runMain(program, { disableErrorReporting: true })
  )
