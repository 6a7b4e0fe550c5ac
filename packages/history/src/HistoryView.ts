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
import { HISTORY_FILE, TOOL_RESULTS_DIR } from "@ctxo/store/Paths"
import { Either } from "effect"
import { MessageNotFound } from "./HistoryErrors.ts"
import type { Dismissal, HistoryDocument, Message, Part, Summary, ToolResultPart } from "./Message.ts"
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
        data: placeholderText(dismissal, `${part.name}${describeInput(call?.input)} result`),
        // An error stays whole (seed 002 A3), placeholder or not.
        ...(part.error === undefined ? {} : { error: part.error })
      }
    }
    if (part._tag === "text")
      return { _tag: "text", text: placeholderText(dismissal, `${message.role} message`) }
    return part // a tool call stays: its result (placeholder or not) still answers it
  })
  return { ...message, parts }
}

/**
 * The placeholder of a tool result a reduced turn leaves out: what was called, and where the full
 * result is (`[Read(src/auth.ts) result — not shown to fit the budget; the full result is on file:
 * tool-results/call_1.json]`), in the style of a dismissed memory's placeholder.
 */
export const omittedResultText = (call: string, onFile: string): string =>
  `[${call} result — not shown to fit the budget; the full result is on file: ${onFile}]`

/**
 * A tool result as a reduced turn shows it: status and error kept, its data the placeholder naming
 * the call (`input`: the call's arguments) and where the full result is (`full`, else `onFile`).
 */
export const omittedResult = (part: ToolResultPart, input: unknown, onFile: string): ToolResultPart => ({
  _tag: "tool-result",
  callId: part.callId,
  name: part.name,
  status: part.status,
  data: omittedResultText(`${part.name}${describeInput(input)}`, part.full ?? onFile),
  ...(part.error === undefined ? {} : { error: part.error })
})

/** Text longer than this in a reduced turn's steps (not its input or answer) is cut to its head. */
const REDUCED_TEXT_CHARS = 400
/** A tool call's string argument longer than this is cut to its head in a reduced turn. */
const REDUCED_ARGUMENT_CHARS = 200

const cutText = (text: string, max: number, onFile: string) =>
  text.length <= max
    ? text
    : `${text.slice(0, max)}… [${text.length - max} more characters not shown to fit the budget; on file: ${onFile}]`

const cutArguments = (input: unknown, onFile: string): unknown => {
  if (typeof input === "string") return cutText(input, REDUCED_ARGUMENT_CHARS, onFile)
  if (Array.isArray(input)) return input.map((v) => cutArguments(v, onFile))
  if (typeof input === "object" && input !== null)
    return Object.fromEntries(Object.entries(input).map(([k, v]) => [k, cutArguments(v, onFile)]))
  return input
}

export interface ReduceOptions {
  /** The history file the messages are kept in, relative to the session (default `messages.json`). */
  readonly historyFile?: string
}

/**
 * A finished turn reduced to fit a budget: its input and final answer as they are; each tool
 * result a placeholder that names the call and where the full result is on file (status and error
 * kept); long words of its steps and long tool-call arguments cut to their head, marked. Calls keep
 * their results (pairs stay whole); pinned messages and curated placeholders stay as they are;
 * every message keeps its id. The same turn when there is nothing to reduce.
 */
export const reduceTurn = (turn: Turn, options: ReduceOptions = {}): Turn => {
  const historyFile = options.historyFile ?? HISTORY_FILE
  // The same messages reduce to the same turn (its message array too: counts and hashes by it hold).
  const hit = reducedTurns.get(turn.messages)
  if (hit !== undefined && hit.historyFile === historyFile && hit.turn.turn === turn.turn) {
    if (hit.turn === turn) return hit.reduced
    return hit.reduced === hit.turn ? turn : { ...turn, messages: hit.reduced.messages }
  }
  const reduced = reduceTurnFresh(turn, historyFile)
  reducedTurns.set(turn.messages, { historyFile, turn, reduced })
  return reduced
}

/** Reduced turns by their message array. */
const reducedTurns = new WeakMap<
  ReadonlyArray<Message>,
  { readonly historyFile: string; readonly turn: Turn; readonly reduced: Turn }
>()

const reduceTurnFresh = (turn: Turn, historyFile: string): Turn => {
  let inputs: Map<string, unknown> | undefined
  const inputOf = (callId: string) => {
    if (inputs === undefined) {
      inputs = new Map()
      for (const m of turn.messages) for (const call of toolCallsOf(m)) inputs.set(call.callId, call.input)
    }
    return inputs.get(callId)
  }
  let changed = false
  const messages = turn.messages.map((m): Message => {
    const cached = reducedMessages.get(m)
    const reduced =
      cached !== undefined && cached.historyFile === historyFile
        ? cached.reduced
        : reduceMessage(m, historyFile, inputOf)
    if (cached === undefined || cached.historyFile !== historyFile)
      reducedMessages.set(m, { historyFile, reduced })
    if (reduced !== m) changed = true
    return reduced
  })
  return changed ? { ...turn, messages } : turn
}

/** Reduced messages by the message (a warm compile reduces and counts nothing again). */
const reducedMessages = new WeakMap<Message, { readonly historyFile: string; readonly reduced: Message }>()

const reduceMessage = (m: Message, historyFile: string, inputOf: (callId: string) => unknown): Message => {
  if (m.meta.pinned === true || m.meta.dismissed !== undefined) return m
  if (m.role === "user" || m.role === "system" || m.meta.kind === "final" || m.meta.kind === "input") return m
  const onFile = `${historyFile} (message ${m.id})`
  let touched = false
  const parts = m.parts.map((part): Part => {
    if (part._tag === "tool-result") {
      touched = true
      return omittedResult(part, inputOf(part.callId), onFile)
    }
    if (part._tag === "text") {
      const text = cutText(part.text, REDUCED_TEXT_CHARS, onFile)
      if (text === part.text) return part
      touched = true
      return { _tag: "text", text }
    }
    const input = cutArguments(part.input, onFile)
    if (JSON.stringify(input) === JSON.stringify(part.input)) return part
    touched = true
    return { ...part, input }
  })
  if (!touched) return m
  return { ...m, parts }
}

/** "turns 3-7" from 3 and 7, "turn 3" from 3 and 3. */
const span = (from: number, to: number) => (from === to ? `turn ${from}` : `turns ${from}-${to}`)

/** Turn numbers as spans: [3, 4, 5, 9] -> "turns 3-5; turn 9". */
export const turnSpans = (turns: ReadonlyArray<number>): string => {
  const sorted = [...new Set(turns)].sort((a, b) => a - b)
  const out: Array<string> = []
  let i = 0
  while (i < sorted.length) {
    let j = i
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++
    out.push(span(sorted[i]!, sorted[j]!))
    i = j + 1
  }
  return out.join("; ")
}

/**
 * The note a request carries for earlier turns it leaves out with no summary shown for them:
 * which turns, and that they are on file.
 */
export const leftOutTurnsNote = (turns: ReadonlyArray<number>, historyFile = HISTORY_FILE): string =>
  turns.length === 0
    ? ""
    : `(Earlier ${turnSpans(turns)} left out to fit the budget, with no summary shown for ${turns.length === 1 ? "it" : "them"}; on file in ${historyFile}, full tool results in ${TOOL_RESULTS_DIR}/.)`

/** The summary as the model reads it (a system message in L3). */
export const summaryText = (summary: Summary): string => summary.text

/**
 * A call whose result is not in history yet (its turn was interrupted and not resumed) is shown
 * with an `interrupted` error result right after it: a model never sees a call without its result.
 */
const answerDangling = (messages: ReadonlyArray<Message>): ReadonlyArray<Message> => {
  const answered = new Set<string>()
  for (const m of messages) for (const p of m.parts) if (p._tag === "tool-result") answered.add(p.callId)
  // Every call answered (as almost always): the messages as they are.
  if (!messages.some((m) => m.parts.some((p) => p._tag === "tool-call" && !answered.has(p.callId))))
    return messages
  return messages.flatMap((m) => {
    const dangling = toolCallsOf(m).filter((c) => !answered.has(c.callId))
    if (dangling.length === 0) return [m]
    return [
      m,
      ...dangling.map((call) => interruptedResult(`${m.id}-interrupted-${call.callId}`, m.meta.turn, call))
    ]
  })
}

/**
 * Which of `messages` (some or all of the document's `all`) a view shows, curated: archived ones and
 * `exceptTurn`'s left out; before any call is answered.
 */
const shownOf = (messages: ReadonlyArray<Message>, all: ReadonlyArray<Message>, exceptTurn?: number) => {
  const shown: Array<Message> = []
  for (const m of messages)
    if (m.meta.archivedBy === undefined && m.meta.turn !== exceptTurn) shown.push(curate(m, all))
  return shown
}

export const historyView = (doc: HistoryDocument, options: ViewOptions = {}): HistoryView => {
  const visible = answerDangling(shownOf(doc.messages, doc.messages, options.exceptTurn))
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
 * A document's whole view (`historyView(doc)`, no options) with what the view of a document grown
 * from it needs to start where it ended.
 */
export interface ViewState {
  readonly doc: HistoryDocument
  readonly view: HistoryView
  /** Every tool call shown has its result among the shown messages (no interrupted result put in). */
  readonly answered: boolean
  /**
   * The calls of dismissed tool results shown with no call in the document: a call of one of them
   * recorded later changes that result's placeholder (never in a recorded history, whose results
   * follow their calls).
   */
  readonly unmatched: ReadonlySet<string>
}

const noCalls: ReadonlySet<string> = new Set()

/** Calls of the dismissed tool results among `messages` that no call of `all` makes. */
const unmatchedOf = (messages: ReadonlyArray<Message>, all: ReadonlyArray<Message>, into?: Set<string>) => {
  let out = into
  for (const m of messages)
    if (m.meta.dismissed !== undefined)
      for (const p of m.parts)
        if (p._tag === "tool-result" && callName(all, p.callId) === undefined) {
          out ??= new Set()
          out.add(p.callId)
        }
  return out
}

const wholeViewState = (doc: HistoryDocument): ViewState => {
  const shown = shownOf(doc.messages, doc.messages)
  const visible = answerDangling(shown)
  return {
    doc,
    view: { summaries: doc.compression, olderSummaries: 0, messages: visible, turns: turnsOf(visible) },
    answered: visible === shown,
    unmatched: unmatchedOf(doc.messages, doc.messages) ?? noCalls
  }
}

/**
 * `historyView(doc)` (no options), started where `previous` ended when the document grew from its
 * document at the end (the same message objects, then new ones, the same summaries), every call
 * previously shown had its result and the new calls have theirs among the new messages: only the
 * new messages are curated and grouped. Any other document is viewed whole. The same view either way.
 */
export const grownView = (doc: HistoryDocument, previous?: ViewState): ViewState => {
  if (previous === undefined) return wholeViewState(doc)
  if (previous.doc === doc) return previous
  const before = previous.doc.messages
  const now = doc.messages
  if (!previous.answered || doc.compression !== previous.doc.compression || now.length < before.length)
    return wholeViewState(doc)
  for (let i = before.length - 1; i >= 0; i--) if (now[i] !== before[i]) return wholeViewState(doc)
  const added = now.slice(before.length)
  const tail = shownOf(added, now)
  if (answerDangling(tail) !== tail) return wholeViewState(doc)
  let unmatched = previous.unmatched
  if (unmatched.size > 0 && added.some((m) => toolCallsOf(m).some((c) => unmatched.has(c.callId))))
    return wholeViewState(doc)
  if (added.some((m) => m.meta.dismissed !== undefined))
    unmatched = unmatchedOf(added, now, new Set(unmatched)) ?? unmatched
  const messages = tail.length === 0 ? previous.view.messages : previous.view.messages.concat(tail)
  return {
    doc,
    view: {
      summaries: doc.compression,
      olderSummaries: 0,
      messages,
      turns: tail.length === 0 ? previous.view.turns : turnsOf(messages)
    },
    answered: true,
    unmatched
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
