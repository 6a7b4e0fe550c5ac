/**
 * The running turn: compiled with no new input while the last turn of history is unfinished (each
 * step of an agent turn). The model answers it, so it is shown as the turn goes on, not as history:
 *
 * - its input is expanded like a new query (mention reminder, references written inline and those
 *   recorded with the input, resolved and appended: `mergeReferences`);
 * - its tool results are full observations: a result whose full form was kept as a file (`full`,
 *   relative to the session) shows that file's status, data and error instead of the compressed
 *   data history keeps;
 * - when the turn does not fit with every observation full, the older ones fall back to their
 *   compressed form, oldest first, then to a placeholder naming the call and where the full result
 *   is (as a reduced turn of history shows it), oldest first; the newest stays whole
 *   (`variant(v)`: v steps of that fallback, 0 to `variants`).
 */
import { omittedResult } from "@ctxo/history/HistoryView"
import type { Message, Part, ToolResultPart } from "@ctxo/history/Message"
import { textOf, toolCallsOf } from "@ctxo/history/Message"
import type { Turn } from "@ctxo/history/Turns"
import { Effect, Either } from "effect"
import type * as CompileCache from "../CompileCache.ts"
import type { UnresolvedReference } from "../CompilerErrors.ts"
import type * as Workspace from "../Workspace.ts"
import { mergeReferences } from "./mergeReferences.ts"

export interface RunningTurn {
  /** Steps of fallback there are: each older observation compressed, then each a placeholder. */
  readonly variants: number
  /** The turn after `v` steps of fallback (0: every observation full). */
  readonly variant: (v: number) => Turn
  /** What `variant(v)` changed, for a warning ("" for 0). */
  readonly describe: (v: number) => string
}

type FullResult = Pick<ToolResultPart, "status" | "data" | "error">

const parseFull = (text: string): FullResult | undefined => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return undefined
  }
  if (typeof value !== "object" || value === null) return undefined
  const o = value as Record<string, unknown>
  if (o.status !== "success" && o.status !== "error") return undefined
  const error = o.error as { message?: unknown; code?: unknown } | undefined
  const validError =
    error === undefined ||
    (typeof error === "object" &&
      error !== null &&
      typeof error.message === "string" &&
      (error.code === undefined || typeof error.code === "string"))
  if (!validError) return undefined
  return {
    status: o.status,
    ...(o.data === undefined ? {} : { data: o.data }),
    ...(error === undefined ? {} : { error: error as FullResult["error"] & object })
  }
}

/** The observation as the running step sees it: the full result in place of the compressed one. */
const fullPart = (part: ToolResultPart, full: FullResult): ToolResultPart => ({
  _tag: "tool-result",
  callId: part.callId,
  name: part.name,
  ...full
})

export const prepareRunningTurn = (options: {
  readonly workspace: Workspace.Service
  readonly cache: CompileCache.Service
  readonly sessionId: string
  readonly turn: Turn
  /** The history file (placeholders name it for results kept nowhere else). */
  readonly historyFile: string
  readonly warn: (message: string) => void
}): Effect.Effect<RunningTurn, UnresolvedReference> => Effect.gen(() => preparing(options))

function* preparing(options: Parameters<typeof prepareRunningTurn>[0]) {
  const { workspace: ws, cache, sessionId: sid, turn, warn } = options
  const messages: Array<Message> = []
  // Where each observation is: message index, part index, the compressed and the full part.
  const observations: Array<{
    readonly message: number
    readonly part: number
    readonly compressed: ToolResultPart
    readonly full: ToolResultPart | undefined
  }> = []
  const inputs = new Map<string, unknown>()
  for (const m of turn.messages) for (const call of toolCallsOf(m)) inputs.set(call.callId, call.input)
  for (const message of turn.messages) {
    if (message.role === "user" && message.meta.kind === "input") {
      const text = textOf(message)
      const expanded = yield* mergeReferences({
        workspace: ws,
        cache,
        sessionId: sid,
        text,
        references: message.meta.references ?? [],
        warn
      })
      messages.push(expanded === text ? message : { ...message, parts: [{ _tag: "text", text: expanded }] })
      continue
    }
    for (const [index, part] of message.parts.entries()) {
      if (part._tag !== "tool-result") continue
      if (part.full === undefined) {
        observations.push({ message: messages.length, part: index, compressed: part, full: undefined })
        continue
      }
      // A path history cannot be read by (missing, outside the session) costs the step only the
      // full form, never the compile.
      const read = yield* Effect.either(ws.read("session", sid, part.full))
      const text = Either.getOrUndefined(read)
      const full = text === undefined ? undefined : parseFull(text)
      if (full === undefined) {
        const problem = Either.isLeft(read)
          ? `cannot be read (${read.left.reason})`
          : text === undefined
            ? "is missing"
            : "is not a tool result"
        warn(
          `${part.full}: the full result of ${part.name} (${part.callId}) ${problem}; the running step sees the compressed one`
        )
        observations.push({ message: messages.length, part: index, compressed: part, full: undefined })
        continue
      }
      observations.push({
        message: messages.length,
        part: index,
        compressed: part,
        full: fullPart(part, full)
      })
    }
    messages.push(message)
  }
  const older = Math.max(0, observations.length - 1)
  const variants = new Map<number, Turn>()
  const variant = (v: number): Turn => {
    let shown = variants.get(v)
    if (shown === undefined) {
      shown = variantOf(v)
      variants.set(v, shown)
    }
    return shown
  }
  const variantOf = (v: number): Turn => {
    const compressed = Math.min(v, older)
    const placeholders = Math.max(0, v - older)
    const shown = messages.slice()
    let changed = false
    for (const [i, o] of observations.entries()) {
      const part =
        i < placeholders
          ? omittedResult(
              o.compressed,
              inputs.get(o.compressed.callId),
              `${options.historyFile} (message ${messages[o.message]!.id})`
            )
          : i < compressed || o.full === undefined
            ? undefined
            : o.full
      if (part === undefined) continue
      const message = shown[o.message]!
      const parts: Array<Part> = message.parts.slice()
      parts[o.part] = part
      shown[o.message] = { ...message, parts }
      changed = true
    }
    return changed ? { ...turn, messages: shown } : { ...turn, messages }
  }
  const describe = (v: number) => {
    const compressed = Math.min(v, older)
    const placeholders = Math.max(0, v - older)
    const count = (n: number) => `${n} older tool result${n === 1 ? " is" : "s are"}`
    return v === 0
      ? ""
      : placeholders === 0
        ? `the running turn's ${count(compressed)} shown compressed to fit the budget (the newest is whole)`
        : `the running turn's ${count(placeholders)} shown as placeholders${placeholders < older ? ` (${older - placeholders} more compressed)` : ""} to fit the budget (the newest is whole; the full results are on file)`
  }
  return { variants: 2 * older, variant, describe }
}
