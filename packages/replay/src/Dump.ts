/**
 * `ctxo replay --dump DIR`: every compiled request as `DIR/<session>/<model>/turn-<k>[-step-<s>][-retry].json`
 * = `{ request, layers: [{ name, from, to }] (message index ranges), tokens, window, reserve }`.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import type { CompileResult } from "@ctxo/compiler/Compile"
import { chatMessagesOf } from "@ctxo/compiler/Compile"
import { Effect } from "effect"
import type { Where } from "./Invariants.ts"

/** The message index range of each layer in the rendered request. */
export const layerRanges = (result: CompileResult) => {
  const messages = chatMessagesOf(result)
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

export const dumpName = (where: Where) =>
  `turn-${where.turn}${where.step > 0 ? `-step-${where.step}` : ""}${where.phase === "retry" ? "-retry" : ""}.json`

/** A writer for `onCompiled` that dumps every compile under `dir`. */
export const dumpTo = (dir: string) => (where: Where, result: CompileResult, window: number) =>
  Effect.sync(() => {
    const folder = join(dir, where.session, where.model)
    mkdirSync(folder, { recursive: true })
    const body = {
      request: result.request,
      layers: layerRanges(result),
      tokens: result.report.total,
      window,
      reserve: result.report.outputReserve
    }
    writeFileSync(join(folder, dumpName(where)), `${JSON.stringify(body, null, 2)}\n`)
  })
