/**
 * What a model sees of a history: the compiled view (L3) and memory curation (seed 000).
 *
 * - Archived messages (compacted into a summary) are left out; the summaries stand in for them,
 *   as system messages, the newest as many as their budget allows, with a note that older ones
 *   are kept on file.
 * - A dismissed tool result (`dismissMemory`, by the model) or an excluded message (by the user)
 *   shows a placeholder that keeps cause and effect readable; the call stays, so pairs stay whole.
 * - The file keeps everything.
 */
import { Either } from "effect"
import { MessageNotFound } from "./HistoryErrors.ts"
import type { Dismissal, HistoryDocument, Message, Part, Summary } from "./Message.ts"
import { toolCallsOf } from "./Message.ts"
import type { Turn } from "./Turns.ts"
import { interruptedResult, turnsOf } from "./Turns.ts"

export interface ViewOptions {
  /** Leave this turn out (the running turn: its input and steps come from the scratchpad). */
  readonly exceptTurn?: number
  /** Tokens the summaries may take; the newest that fit are shown (default: all). */
  readonly summaryBudget?: number
  readonly countTokens?: (text: string) => number
}

export interface HistoryView {
  /** Summaries shown, oldest first. */
  readonly summaries: ReadonlyArray<Summary>
  /** Summaries left out for budget: kept on file. */
  readonly olderSummaries: number
  /** Visible messages, curated. */
  readonly messages: ReadonlyArray<Message>
  /** The same messages by turn. */
  readonly turns: ReadonlyArray<Turn>
}

const callName = (doc: ReadonlyArray<Message>, callId: string) => {
  for (const m of doc)
    for (const call of toolCallsOf(m))
      if (call.callId === callId) return { name: call.name, input: call.input }
  return undefined
}

const describeInput = (input: unknown): string => {
  if (typeof input !== "object" || input === null) return ""
  const o = input as Record<string, unknown>
  const target = o.path ?? o.file ?? o.file_path ?? o.pattern ?? o.command
  return typeof target === "string" ? `(${target})` : ""
}

/** The placeholder text that replaces a curated message's content. */
export const placeholderText = (dismissal: Dismissal, what: string): string =>
  dismissal.by === "model"
    ? `[${what} — dismissed by the model: ${dismissal.summary}]`
    : `[${what} — excluded by the user${dismissal.summary === "" ? "" : `: ${dismissal.summary}`}]`

const curate = (message: Message, all: ReadonlyArray<Message>): Message => {
  const dismissal = message.meta.dismissed
  if (dismissal === undefined) return message
  const parts: Array<Part> = message.parts.map((part) => {
    if (part._tag === "tool-result") {
      const call = callName(all, part.callId)
      return {
        _tag: "tool-result",
        callId: part.callId,
        name: part.name,
        status: part.status,
        data: placeholderText(dismissal, `${part.name}${describeInput(call?.input)} result`)
      }
    }
    if (part._tag === "text")
      return { _tag: "text", text: placeholderText(dismissal, `${message.role} message`) }
    return part // a tool call stays: its result (placeholder or not) still answers it
  })
  return { ...message, parts }
}

/** The summary as the model reads it (a system message in L3). */
export const summaryText = (summary: Summary): string => summary.text

/**
 * A call whose result is not in history yet (its turn was interrupted and not resumed) is shown
 * with an `interrupted` error result right after it: a model never sees a call without its result.
 */
const answerDangling = (messages: ReadonlyArray<Message>): Array<Message> => {
  const answered = new Set(
    messages.flatMap((m) => m.parts.filter((p) => p._tag === "tool-result").map((p) => p.callId))
  )
  return messages.flatMap((m) => {
    const dangling = toolCallsOf(m).filter((c) => !answered.has(c.callId))
    if (dangling.length === 0) return [m]
    return [
      m,
      ...dangling.map((call) => interruptedResult(`${m.id}-interrupted-${call.callId}`, m.meta.turn, call))
    ]
  })
}

export const historyView = (doc: HistoryDocument, options: ViewOptions = {}): HistoryView => {
  const visible = answerDangling(
    doc.messages
      .filter((m) => m.meta.archivedBy === undefined && m.meta.turn !== options.exceptTurn)
      .map((m) => curate(m, doc.messages))
  )
  let summaries = doc.compression
  if (options.summaryBudget !== undefined) {
    const count = options.countTokens ?? ((text: string) => Math.ceil(text.length / 3))
    const kept: Array<Summary> = []
    let used = 0
    for (const summary of [...doc.compression].reverse()) {
      const tokens = count(summaryText(summary))
      if (used + tokens > options.summaryBudget) break
      kept.unshift(summary)
      used += tokens
    }
    summaries = kept
  }
  return {
    summaries,
    olderSummaries: doc.compression.length - summaries.length,
    messages: visible,
    turns: turnsOf(visible)
  }
}

/**
 * L3 as messages: the summaries shown, each a system message (the first one saying how many older
 * summaries are kept on file), then the visible history.
 */
export const toL3 = (
  view: Pick<HistoryView, "summaries" | "olderSummaries" | "messages">
): Array<Message> => [
  ...view.summaries.map(
    (summary, i): Message => ({
      id: summary.id,
      role: "system",
      parts: [
        {
          _tag: "text",
          text:
            i === 0 && view.olderSummaries > 0
              ? `${olderSummariesNote(view.olderSummaries)}\n\n${summary.text}`
              : summary.text
        }
      ],
      meta: { turn: summary.toTurn, kind: "summary" }
    })
  ),
  ...view.messages
]

/** The note that goes with the summaries when older ones were left out. */
export const olderSummariesNote = (count: number): string =>
  count === 0
    ? ""
    : `(${count} older summar${count === 1 ? "y is" : "ies are"} kept on file in messages.json.)`

const updateMessage = (
  doc: HistoryDocument,
  messageId: string,
  check: (m: Message) => string | undefined,
  update: (m: Message) => Message
): Either.Either<HistoryDocument, MessageNotFound> => {
  const index = doc.messages.findIndex((m) => m.id === messageId)
  if (index === -1)
    return Either.left(new MessageNotFound({ messageId, reason: "no such message in this history" }))
  const problem = check(doc.messages[index]!)
  if (problem !== undefined) return Either.left(new MessageNotFound({ messageId, reason: problem }))
  const messages = [...doc.messages]
  messages[index] = update(doc.messages[index]!)
  return Either.right({ ...doc, messages })
}

/**
 * The model's `dismiss_memory(targetMessageId, summary)`: the tool result is shown as a placeholder
 * with the model's summary from now on. Only tool results can be dismissed; pinned ones cannot.
 */
export const dismissMemory = (
  doc: HistoryDocument,
  targetMessageId: string,
  summary: string,
  callId?: string
): Either.Either<HistoryDocument, MessageNotFound> =>
  updateMessage(
    doc,
    targetMessageId,
    (m) =>
      m.role !== "tool"
        ? "only tool results can be dismissed"
        : m.meta.pinned === true
          ? "the message is pinned"
          : undefined,
    (m) => ({
      ...m,
      meta: { ...m.meta, dismissed: { by: "model", summary, ...(callId === undefined ? {} : { callId }) } }
    })
  )

/** A user's exclusion: any message but the turn's input shows a placeholder. */
export const excludeMessage = (
  doc: HistoryDocument,
  messageId: string,
  reason = ""
): Either.Either<HistoryDocument, MessageNotFound> =>
  updateMessage(
    doc,
    messageId,
    (m) => (m.meta.pinned === true ? "the message is pinned" : undefined),
    (m) => ({ ...m, meta: { ...m.meta, dismissed: { by: "user", summary: reason } } })
  )

/** Undoes a dismissal or exclusion. */
export const restoreMessage = (
  doc: HistoryDocument,
  messageId: string
): Either.Either<HistoryDocument, MessageNotFound> =>
  updateMessage(
    doc,
    messageId,
    () => undefined,
    (m) => {
      const { dismissed: _, ...meta } = m.meta
      return { ...m, meta }
    }
  )

/** Pins a message: it is never compacted, dismissed or excluded. */
export const pinMessage = (doc: HistoryDocument, messageId: string, pinned = true) =>
  updateMessage(
    doc,
    messageId,
    () => undefined,
    (m) => ({ ...m, meta: { ...m.meta, pinned } })
  )

export interface ScratchpadStep {
  readonly text?: string
  readonly toolCall?: { readonly callId: string; readonly name: string; readonly input: unknown }
  /** The full observation the tool returned: the running step sees it whole. */
  readonly observation?: {
    readonly status: "success" | "error"
    readonly data?: unknown
    readonly error?: { readonly code?: string; readonly message: string }
  }
}

/**
 * What the model sees while a turn runs (seed 002 D3): previous turns from history (curated,
 * compacted), the current input exactly once, then this turn's steps with full observations.
 */
export const turnContext = (
  doc: HistoryDocument,
  options: {
    readonly turn: number
    readonly input: string
    readonly scratchpad: ReadonlyArray<ScratchpadStep>
    readonly view?: Omit<ViewOptions, "exceptTurn">
  }
): {
  readonly summaries: ReadonlyArray<Summary>
  readonly olderSummaries: number
  readonly messages: ReadonlyArray<Message>
} => {
  const view = historyView(doc, { ...options.view, exceptTurn: options.turn })
  const messages: Array<Message> = [
    ...view.messages,
    {
      id: `t${options.turn}-input`,
      role: "user",
      parts: [{ _tag: "text", text: options.input }],
      meta: { turn: options.turn, kind: "input" }
    }
  ]
  options.scratchpad.forEach((step, i) => {
    const parts: Array<Part> = []
    if (step.text !== undefined && step.text !== "") parts.push({ _tag: "text", text: step.text })
    if (step.toolCall !== undefined) parts.push({ _tag: "tool-call", ...step.toolCall })
    messages.push({
      id: `t${options.turn}-scratch-${i}`,
      role: "assistant",
      parts,
      meta: { turn: options.turn, step: i + 1, kind: "step" }
    })
    if (step.toolCall !== undefined && step.observation !== undefined) {
      messages.push({
        id: `t${options.turn}-scratch-${i}-result`,
        role: "tool",
        parts: [
          {
            _tag: "tool-result",
            callId: step.toolCall.callId,
            name: step.toolCall.name,
            status: step.observation.status,
            ...(step.observation.data === undefined ? {} : { data: step.observation.data }),
            ...(step.observation.error === undefined ? {} : { error: step.observation.error })
          }
        ],
        meta: { turn: options.turn, step: i + 1, kind: "step" }
      })
    }
  })
  return { summaries: view.summaries, olderSummaries: view.olderSummaries, messages }
}
