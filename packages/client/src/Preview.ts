/**
 * A context preview read for people: its budget report and prefix decoded with their schemas (the
 * contract carries them as plain JSON), the layers of the static prefix, every unit that was cut
 * with its reason, and the request as text in its format, line by line, for showing and diffing.
 */
import type { Preview } from "@ctxo/api/Api"
import { BudgetReport } from "@ctxo/budget/BudgetReport"
import { Either, Schema } from "effect"

export type { Preview } from "@ctxo/api/Api"

export const PrefixStats = Schema.Struct({
  /** Hash of the static layers in front of the history (what a provider's prompt cache keys on). */
  hash: Schema.String,
  tokens: Schema.Number,
  /** Leading messages identical to the previous compile's, and their tokens. */
  unchangedMessages: Schema.Number,
  unchangedTokens: Schema.Number
})
export type PrefixStats = typeof PrefixStats.Type

export interface PreviewView {
  readonly preview: Preview
  readonly report: BudgetReport
  readonly prefix: PrefixStats
  /** The leading layers every request repeats unchanged (system layers before the history and input). */
  readonly staticLayers: ReadonlyArray<string>
  /** Units not sent whole: cut to fit, or dropped, each with why. */
  readonly cuts: ReadonlyArray<BudgetReport["units"][number]>
  /** The request as the model gets it, as text (JSON for message formats, the prompt for ReAct). */
  readonly requestText: string
}

const decodeReport = Schema.decodeUnknownEither(BudgetReport)
const decodePrefix = Schema.decodeUnknownEither(PrefixStats)

/** Layers before the first that is not a system layer (the history, `checkpoint_messages`, or the input, `query`). */
export const staticLayersOf = (layers: Preview["layers"]): ReadonlyArray<string> => {
  const out: Array<string> = []
  for (const layer of layers) {
    if (layer.id === "checkpoint_messages" || layer.id === "query") break
    out.push(layer.id)
  }
  return out
}

export const requestTextOf = (preview: Preview): string =>
  preview.format === "react" ? preview.request.prompt : JSON.stringify(preview.request, null, 2)

/** The preview with its report and prefix typed; a sentence naming the field when they are not what they should be. */
export const readPreview = (preview: Preview): Either.Either<PreviewView, string> =>
  Either.gen(function* () {
    const report = yield* Either.mapLeft(
      decodeReport(preview.report),
      (e) => `the preview's report: ${e.message}`
    )
    const prefix = yield* Either.mapLeft(
      decodePrefix(preview.prefix),
      (e) => `the preview's prefix: ${e.message}`
    )
    return {
      preview,
      report,
      prefix,
      staticLayers: staticLayersOf(preview.layers),
      cuts: report.units.filter((u) => u.status !== "included"),
      requestText: requestTextOf(preview)
    }
  })
