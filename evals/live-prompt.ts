/**
 * The prompt of the live suite: a recorded session replayed up to its last turn, and that turn's
 * input compiled by ctxo into OpenAI chat messages (promptfoo's openai and anthropic providers
 * both take them). What the model answers is graded for using the compiled context.
 */
import { readFileSync } from "node:fs"
import { resolve } from "node:path"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import type { CompileResult } from "@ctxo/compiler/Compile"
import { live, replaySession } from "@ctxo/replay/Replay"
import { parseSession } from "@ctxo/replay/Session"
import { Effect, Either, Layer } from "effect"

const root = resolve(import.meta.dirname, "..")

export default async ({ vars }: { vars: { recording: string } }) => {
  const session = Either.getOrThrow(
    parseSession(readFileSync(resolve(root, vars.recording), "utf8"), vars.recording)
  )
  const last = session.turns.length
  let compiled: CompileResult | undefined
  await Effect.runPromise(
    replaySession(
      session,
      { id: "gpt-4o", model: "openai/gpt-4o", format: "openai" },
      {
        onCompiled: (where, result) =>
          Effect.sync(() => {
            if (where.turn === last && where.phase === "input") compiled = result
          })
      }
    ).pipe(Effect.provide(Layer.mergeAll(live, ModelRegistry.layer(), Tokenizer.layer())))
  )
  if (compiled?.format !== "openai")
    throw new Error(`${session.id}: no OpenAI request for the last turn's input`)
  return JSON.stringify(compiled.request.messages)
}
