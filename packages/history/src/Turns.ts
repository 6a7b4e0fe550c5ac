/**
 * Turns and the ReAct flow of seed 002 (A2, D3), as pure functions of the history document.
 *
 * A user message opens a turn; the turn ends when the assistant finishes. While a turn runs,
 * history receives the user input once (`beginTurn`) and each step as it happens (`appendStep`,
 * `appendToolResult`: the tool result already compressed), then the final answer (`finishTurn`).
 * The model meanwhile sees previous turns from history, the input once, and this turn's steps with
 * full observations (`turnContext`).
 *
 * Retries and crashes never duplicate the input: `beginTurn` with the same idempotency key, or the
 * same text while the last turn is unfinished, resumes that turn (and hands back the steps already
 * recorded). A tool call left without a result by a crash gets an explicit error result, so no call
 * is ever without its result.
 */
import type { HistoryDocument, InputReference, Message, Part, ToolCallPart, ToolError } from "./Message.ts"
import { textOf, toolCallsOf, toolResultsOf } from "./Message.ts"

/** Input and output tokens the provider reported for one request. */
export interface Usage {
  readonly inputTokens: number
  readonly outputTokens: number
}

export interface Turn {
  readonly turn: number
  readonly messages: ReadonlyArray<Message>
  readonly finished: boolean
}

/**
 * A turn's words: its input and the assistant's text, one `User: ` / `Assistant: ` line each, no
 * tool traffic. The one form recalled turns (`recall__context`), memories of turns and aggregated
 * turns are written in, so the same turn is the same text wherever it goes.
 */
export const turnWords = (turn: Turn): string => {
  // A turn is immutable: its words are made once per turn object (weakly held, gone with the turn).
  let words = wordsOfTurn.get(turn)
  if (words === undefined) {
    words = turn.messages
      .flatMap((m) => {
        if (m.role !== "user" && m.role !== "assistant") return []
        const text = textOf(m).trim()
        return text === "" ? [] : [`${m.role === "user" ? "User" : "Assistant"}: ${text}`]
      })
      .join("\n")
    wordsOfTurn.set(turn, words)
  }
  return words
}
const wordsOfTurn = new WeakMap<Turn, string>()

/**
 * Messages grouped by turn, in order (a turn where its first message is).
 *
 * A history grows at its end, and each change asks for its turns several times (recording, viewing,
 * compiling, promoting memories): the groupings of each history's last few message lists are kept,
 * and a list that starts with one of them (the same message objects) is grouped from where that one ended,
 * its turns the same objects but the last, when it grew. The list returned is the caller's.
 */
export const turnsOf = (messages: ReadonlyArray<Message>): Array<Turn> => {
  const known =
    messages.length === 0 ? undefined : byFirst.get(messages[0]!)?.find((g) => startsWith(messages, g))
  if (known !== undefined) {
    const extended = extend(known, messages)
    if (extended !== undefined) return extended.slice()
  }
  const turns: Array<{ turn: number; messages: Array<Message>; finished: boolean }> = []
  const byNumber = new Map<number, (typeof turns)[number]>()
  let max = Number.NEGATIVE_INFINITY
  for (const message of messages) {
    let turn = byNumber.get(message.meta.turn)
    if (turn === undefined) {
      turn = { turn: message.meta.turn, messages: [], finished: false }
      byNumber.set(message.meta.turn, turn)
      turns.push(turn)
    }
    turn.messages.push(message)
    if (message.meta.finished === true) turn.finished = true
    if (message.meta.turn > max) max = message.meta.turn
  }
  if (messages.length > 0) remember({ messages, length: messages.length, turns, max })
  return turns.slice()
}

/**
 * A message list's first `length` messages (the list as it was grouped: a caller may add to its own
 * list later), their turns (never changed once kept) and their highest turn number.
 */
interface Grouping {
  readonly messages: ReadonlyArray<Message>
  readonly length: number
  readonly turns: ReadonlyArray<Turn>
  readonly max: number
}
/**
 * The groupings of lists that start with a message, by that message, the newest first:
 * a history's lists (its document's, its view's, memory's) all start with its first message, so each
 * session finds its own however many sessions grouped lists since (one list of groupings for the
 * whole process let a gateway serving a few sessions in turn group every history afresh: 160 µs at
 * 500 turns). A list grown from a kept one takes its place, so each of a history's lists keeps its
 * place however many times another grows meanwhile (a turn with many steps).
 */
const byFirst = new WeakMap<Message, Array<Grouping>>()
const GROUPINGS = 4
const remember = (g: Grouping, grownFrom?: Grouping) => {
  const first = g.messages[0]!
  const kept = byFirst.get(first)
  if (kept === undefined) {
    byFirst.set(first, [g])
    return
  }
  const at = grownFrom === undefined ? -1 : kept.indexOf(grownFrom)
  if (at !== -1) kept.splice(at, 1)
  kept.unshift(g)
  if (kept.length > GROUPINGS) kept.pop()
}
const startsWith = (messages: ReadonlyArray<Message>, grouping: Grouping) => {
  const { messages: prefix, length } = grouping
  if (length > messages.length || prefix.length < length) return false
  for (let i = length - 1; i >= 0; i--) if (messages[i] !== prefix[i]) return false
  return true
}
/**
 * `known` grown by the messages after it, when each goes to its last turn or opens a turn numbered
 * above every turn before (how a history grows); undefined otherwise.
 */
const extend = (known: Grouping, messages: ReadonlyArray<Message>): ReadonlyArray<Turn> | undefined => {
  if (messages.length === known.length) return known.turns
  const turns = known.turns.slice()
  let max = known.max
  let last = turns.at(-1)
  let lastMessages: Array<Message> | undefined
  let lastFinished = false
  const close = () => {
    if (last !== undefined && lastMessages !== undefined) {
      turns[turns.length - 1] = { turn: last.turn, messages: lastMessages, finished: lastFinished }
      lastMessages = undefined
    }
  }
  for (let i = known.length; i < messages.length; i++) {
    const message = messages[i]!
    const number = message.meta.turn
    if (last === undefined || number !== last.turn) {
      // Only a turn numbered above every one before opens here; else group afresh.
      if (number <= max) return undefined
      close()
      last = { turn: number, messages: [], finished: false }
      turns.push(last)
      max = number
    }
    if (lastMessages === undefined) {
      lastMessages = [...last.messages]
      lastFinished = last.finished
    }
    lastMessages.push(message)
    if (message.meta.finished === true) lastFinished = true
  }
  close()
  remember({ messages, length: messages.length, turns, max }, known)
  return turns
}

/** The final of a turn abandoned unfinished: another input came before it had an answer. */
export const ABANDONED_ANSWER =
  "(No answer: this turn was interrupted before it had one, and the conversation went on without it.)"

export const INTERRUPTED: ToolError = {
  code: "interrupted",
  message: "No result: the turn was interrupted before the tool returned."
}

/** Tool calls of a turn that have no result yet. */
export const danglingCalls = (messages: ReadonlyArray<Message>): Array<ToolCallPart> => {
  const answered = new Set(messages.flatMap((m) => toolResultsOf(m).map((r) => r.callId)))
  return messages.flatMap(toolCallsOf).filter((call) => !answered.has(call.callId))
}

const nextId = (doc: HistoryDocument, turn: number) =>
  `t${turn}-${doc.messages.filter((m) => m.meta.turn === turn).length}`

const push = (doc: HistoryDocument, message: Message): HistoryDocument => ({
  ...doc,
  messages: [...doc.messages, message]
})

/** The result that answers a call whose tool never returned (in history, or only in a view). */
export const interruptedResult = (id: string, turn: number, call: ToolCallPart): Message => ({
  id,
  role: "tool",
  parts: [{ _tag: "tool-result", callId: call.callId, name: call.name, status: "error", error: INTERRUPTED }],
  meta: { turn, kind: "step" }
})

/** Closes dangling calls of a turn with an `interrupted` error result. */
const closeDangling = (doc: HistoryDocument, turn: number): HistoryDocument => {
  const dangling = danglingCalls(doc.messages.filter((m) => m.meta.turn === turn))
  return dangling.reduce(
    (current, call) => push(current, interruptedResult(nextId(current, turn), turn, call)),
    doc
  )
}

export interface BeginTurnOptions {
  readonly input: string
  /** The client's idempotency key: the same key always means the same turn. */
  readonly inputKey?: string
  /** References sent with the input (manifest shape); kept on the input message. */
  readonly references?: ReadonlyArray<InputReference>
  /** The thinking-map node the input is about (seed 004): the turn is part of that node's conversation. */
  readonly node?: string
  readonly now?: string
}

export interface BeganTurn {
  readonly doc: HistoryDocument
  readonly turn: number
  /** The input was already in history (a retry or a resume): it was not appended again. */
  readonly resumed: boolean
  /** The resumed turn had already finished: its answer is in history. */
  readonly finished: boolean
  /** Steps recorded before (for a resumed turn): the runner continues from them. */
  readonly steps: ReadonlyArray<Message>
}

export const lastTurnNumber = (doc: HistoryDocument): number => {
  let max = 0
  for (const m of doc.messages) if (m.meta.turn > max) max = m.meta.turn
  return max
}

export const beginTurn = (doc: HistoryDocument, options: BeginTurnOptions): BeganTurn => {
  const turns = turnsOf(doc.messages)
  const inputOf = (t: Turn) => t.messages.find((m) => m.meta.kind === "input")
  const byKey =
    options.inputKey === undefined
      ? undefined
      : turns.find((t) => inputOf(t)?.meta.inputKey === options.inputKey)
  const last = turns.at(-1)
  const sameUnfinished =
    last !== undefined &&
    !last.finished &&
    inputOf(last) !== undefined &&
    textOf(inputOf(last)!) === options.input
      ? last
      : undefined
  const existing = byKey ?? sameUnfinished
  if (existing !== undefined) {
    const closed = existing.finished ? doc : closeDangling(doc, existing.turn)
    return {
      doc: closed,
      turn: existing.turn,
      resumed: true,
      finished: existing.finished,
      steps: closed.messages.filter((m) => m.meta.turn === existing.turn && m.meta.kind === "step")
    }
  }
  // A different input after an unfinished turn: that turn was abandoned (its client went away, its
  // process died). It is finished where it stands, its calls closed and a final that says so, so
  // every turn stays whole and in order: a retry of it later (its key) gets that final, and is not
  // answered after the turns that came since.
  const closed = last !== undefined && !last.finished ? finishTurn(doc, last.turn, ABANDONED_ANSWER).doc : doc
  const turn = lastTurnNumber(closed) + 1
  const input: Message = {
    id: `t${turn}-0`,
    role: "user",
    parts: [{ _tag: "text", text: options.input }],
    meta: {
      turn,
      kind: "input",
      ...(options.inputKey === undefined ? {} : { inputKey: options.inputKey }),
      ...(options.references === undefined || options.references.length === 0
        ? {}
        : { references: [...options.references] }),
      ...(options.node === undefined ? {} : { node: options.node }),
      ...(options.now === undefined ? {} : { createdAt: options.now })
    }
  }
  return { doc: push(closed, input), turn, resumed: false, finished: false, steps: [] }
}

export interface StepInput {
  /** The model's words for this step (Thought / Action in the ReAct format). */
  readonly text?: string
  /** The provider's usage for the request that produced this step. */
  readonly usage?: Usage
  readonly toolCall?: { readonly callId: string; readonly name: string; readonly input: unknown }
}

const stepNumber = (doc: HistoryDocument, turn: number) =>
  doc.messages.filter((m) => m.meta.turn === turn && m.role === "assistant").length + 1

/** Records an assistant step (its text and the tool call it makes, if any). */
export const appendStep = (
  doc: HistoryDocument,
  turn: number,
  step: StepInput
): { doc: HistoryDocument; message: Message } => {
  const parts: Array<Part> = []
  if (step.text !== undefined && step.text !== "") parts.push({ _tag: "text", text: step.text })
  if (step.toolCall !== undefined) parts.push({ _tag: "tool-call", ...step.toolCall })
  const message: Message = {
    id: nextId(doc, turn),
    role: "assistant",
    parts,
    meta: {
      turn,
      step: stepNumber(doc, turn),
      kind: "step",
      ...(step.usage === undefined ? {} : { usage: step.usage })
    }
  }
  return { doc: push(doc, message), message }
}

export interface RecordedResult {
  readonly callId: string
  readonly name: string
  readonly status: "success" | "error"
  readonly data?: unknown
  readonly error?: ToolError
  readonly full?: string
}

/** Records a (compressed) tool result right after its call. */
export const appendToolResult = (
  doc: HistoryDocument,
  turn: number,
  result: RecordedResult
): { doc: HistoryDocument; message: Message } => {
  const step = doc.messages.filter((m) => m.meta.turn === turn && m.role === "assistant").length
  const message: Message = {
    id: nextId(doc, turn),
    role: "tool",
    parts: [{ _tag: "tool-result", ...result }],
    meta: { turn, step, kind: "step" }
  }
  return { doc: push(doc, message), message }
}

/** Records the assistant's final answer; the turn is finished. */
export const finishTurn = (
  doc: HistoryDocument,
  turn: number,
  text: string,
  usage?: Usage
): { doc: HistoryDocument; message: Message } => {
  const closed = closeDangling(doc, turn)
  const message: Message = {
    id: nextId(closed, turn),
    role: "assistant",
    parts: [{ _tag: "text", text }],
    meta: {
      turn,
      step: stepNumber(closed, turn),
      kind: "final",
      finished: true,
      ...(usage === undefined ? {} : { usage })
    }
  }
  return { doc: push(closed, message), message }
}
