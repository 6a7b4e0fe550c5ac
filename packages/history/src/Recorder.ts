/**
 * The ReAct flow against a `HistoryStore`: every change goes through `modify`, so it is written
 * (atomically, for the file store) before the next step runs. A crash loses at most the step in
 * flight; a retry resumes the turn instead of adding the input again.
 */

import { withSpan } from "@ctxo/store/Spans"
import { Effect } from "effect"
import { type HistoryError, IdempotencyConflict } from "./HistoryErrors.ts"
import { HistoryStore } from "./HistoryStore.ts"
import type { HistoryDocument, Message } from "./Message.ts"
import { textOf } from "./Message.ts"
import type { CompressionLimits, RawToolResult } from "./ToolResultCompressor.ts"
import { compressToolResult } from "./ToolResultCompressor.ts"
import type { BeganTurn, BeginTurnOptions, StepInput, Usage } from "./Turns.ts"
import { appendStep, appendToolResult, beginTurn, finishTurn } from "./Turns.ts"

/**
 * Opens (or resumes) a turn. The same idempotency key with a different message is refused
 * (`IdempotencyConflict`): the new message would otherwise be dropped silently.
 */
export const startTurn = (
  sessionId: string,
  options: BeginTurnOptions
): Effect.Effect<BeganTurn, HistoryError | IdempotencyConflict, HistoryStore> =>
  Effect.flatMap(HistoryStore, (store) =>
    store.modify(sessionId, (doc) => {
      const conflict = keyConflict(doc, options)
      if (conflict !== undefined) return Effect.fail(conflict)
      const began = beginTurn(doc, options)
      return Effect.succeed([began, began.doc] as const)
    })
  ).pipe(
    withSpan("Recorder.startTurn", {
      attributes: { "ctxo.session": sessionId }
    })
  )

/** The conflict when the options' key opened a turn whose input was a different message. */
export const keyConflict = (
  doc: HistoryDocument,
  options: BeginTurnOptions
): IdempotencyConflict | undefined => {
  if (options.inputKey === undefined) return undefined
  const input = doc.messages.find((m) => m.meta.kind === "input" && m.meta.inputKey === options.inputKey)
  return input === undefined || textOf(input) === options.input
    ? undefined
    : new IdempotencyConflict({ key: options.inputKey, turn: input.meta.turn })
}

export const recordStep = (
  sessionId: string,
  turn: number,
  step: StepInput
): Effect.Effect<Message, HistoryError, HistoryStore> =>
  Effect.flatMap(HistoryStore, (store) =>
    store.modify(sessionId, (doc) => {
      const { doc: next, message } = appendStep(doc, turn, step)
      return Effect.succeed([message, next] as const)
    })
  ).pipe(
    withSpan("Recorder.recordStep", {
      attributes: { "ctxo.session": sessionId, "ctxo.turn": turn }
    })
  )

/** `recordToolResult`'s work, its generator made once (`@ctxo/agent`'s `test/HotPath.test.ts`). */
const recordingToolResult = Effect.fnUntraced(function* (
  sessionId: string,
  turn: number,
  call: { readonly callId: string; readonly name: string },
  result: RawToolResult,
  limits: Partial<CompressionLimits> | undefined
) {
  const store = yield* HistoryStore
  const compressed = compressToolResult(call.name, result, limits)
  const full = compressed.truncated ? yield* store.saveFullResult(sessionId, call.callId, result) : undefined
  const data =
    full !== undefined &&
    typeof compressed.data === "object" &&
    compressed.data !== null &&
    !Array.isArray(compressed.data)
      ? { ...compressed.data, readBack: `full result: read_file ${full}` }
      : full !== undefined
        ? { content: compressed.data, readBack: `full result: read_file ${full}` }
        : compressed.data
  return yield* store.modify(sessionId, (doc) => {
    const { doc: next, message } = appendToolResult(doc, turn, {
      callId: call.callId,
      name: call.name,
      status: compressed.status,
      ...(data === undefined ? {} : { data }),
      ...(compressed.error === undefined ? {} : { error: compressed.error }),
      ...(full === undefined ? {} : { full })
    })
    return Effect.succeed([message, next] as const)
  })
})

/**
 * Records a tool result compressed for history. When compression cut anything, the full result
 * is kept as a file first and the history entry names it.
 */
export const recordToolResult = (
  sessionId: string,
  turn: number,
  call: { readonly callId: string; readonly name: string },
  result: RawToolResult,
  limits?: Partial<CompressionLimits>
): Effect.Effect<Message, HistoryError, HistoryStore> =>
  recordingToolResult(sessionId, turn, call, result, limits).pipe(
    withSpan("Recorder.recordToolResult", {
      attributes: { "ctxo.session": sessionId, "ctxo.turn": turn }
    })
  )

/** Records the turn's answer; the answer, and the history it ends (what a read would give back now). */
export const endTurn = (
  sessionId: string,
  turn: number,
  text: string,
  usage?: Usage
): Effect.Effect<{ readonly message: Message; readonly doc: HistoryDocument }, HistoryError, HistoryStore> =>
  Effect.flatMap(HistoryStore, (store) =>
    store.modify(sessionId, (doc) => {
      const ended = finishTurn(doc, turn, text, usage)
      return Effect.succeed([ended, ended.doc] as const)
    })
  ).pipe(
    withSpan("Recorder.endTurn", {
      attributes: { "ctxo.session": sessionId, "ctxo.turn": turn }
    })
  )
