/**
 * Compaction (seed 002 A4, A6, C6, C7, E2; design.md invariant 5).
 *
 * Trigger: `last_usage + ceil(len(input) / 3) >= triggerRatio × window` with at least
 * `minMessages` messages (window from the model registry).
 *
 * Selection keeps at least the last `keepTurns` whole turns (default 10) and archives the older
 * ones: cuts fall only at turn starts, so a tool call never loses its result; turns with a pinned
 * message are never archived; summaries are never compacted again (they are not messages). When
 * the kept turns alone do not fit the budget (a small model), the budget wins: as many whole
 * turns as fit, and the result says so.
 *
 * The archived turns become a summary (a `Summarizer`, with a timeout: default 120 s). On timeout
 * the turns are archived without one and the progress says exactly
 * "Summary generation timed out, keeping recent history only." If what remains still exceeds the
 * trigger, compaction stops and reports it: it never loops.
 */
import type { ModelInfo } from "@ctxo/budget/ModelRegistry"
import { withSpan } from "@ctxo/store/Spans"
import { Duration, Effect, Exit, Mailbox, Option, Stream } from "effect"
import type { HistoryError } from "./HistoryErrors.ts"
import { HistoryStore } from "./HistoryStore.ts"
import { historyView } from "./HistoryView.ts"
import type { HistoryDocument, Message, Summary } from "./Message.ts"
import { FILE_SYSTEM_STATE_HEADING, Summarizer, withFileSystemState } from "./Summarizer.ts"
import type { Turn } from "./Turns.ts"
import { turnsOf } from "./Turns.ts"

export const TIMEOUT_MESSAGE = "Summary generation timed out, keeping recent history only."

export interface CompactionSettings {
  /** Whole turns always kept (default 10). */
  readonly keepTurns: number
  /** Fraction of the window that triggers compaction (default 0.8). */
  readonly triggerRatio: number
  /** No compaction below this many messages (default 3). */
  readonly minMessages: number
  /** How long the summary may take (default 120 s). */
  readonly summaryTimeout: Duration.DurationInput
}

export const defaultSettings: CompactionSettings = {
  keepTurns: 10,
  triggerRatio: 0.8,
  minMessages: 3,
  summaryTimeout: Duration.seconds(120)
}

export interface TriggerDecision {
  readonly trigger: boolean
  readonly estimated: number
  readonly threshold: number
}

/** Seed 002 C7: the last request's reported usage plus a cheap estimate of the new input. */
export const shouldCompact = (options: {
  readonly lastUsage: number
  readonly input: string
  readonly window: number
  readonly messageCount: number
  readonly settings?: Partial<CompactionSettings>
}): TriggerDecision => {
  const settings = { ...defaultSettings, ...options.settings }
  const estimated = options.lastUsage + Math.ceil(options.input.length / 3)
  const threshold = Math.floor(settings.triggerRatio * options.window)
  return {
    trigger: estimated >= threshold && options.messageCount >= settings.minMessages,
    estimated,
    threshold
  }
}

/**
 * The trigger for a history as it stands: `shouldCompact` over its messages compaction has not
 * archived. The compactor decides with it, and a turn that needs to know beforehand whether
 * compaction will run asks the same.
 */
export const triggerFor = (
  doc: HistoryDocument,
  options: {
    readonly lastUsage: number
    readonly input: string
    readonly window: number
    readonly settings?: Partial<CompactionSettings>
  }
): TriggerDecision =>
  shouldCompact({
    ...options,
    messageCount: doc.messages.reduce((n, m) => (m.meta.archivedBy === undefined ? n + 1 : n), 0)
  })

/** Text of a message as a model would read it (for counting). */
export const messageText = (message: Message): string =>
  message.parts
    .map((p) =>
      p._tag === "text"
        ? p.text
        : p._tag === "tool-call"
          ? `${p.name}${JSON.stringify(p.input)}`
          : JSON.stringify({ status: p.status, data: p.data, error: p.error })
    )
    .join("\n")

/**
 * What a message costs in a request beyond its text: a chat API frames each message (about 4
 * tokens) and each tool call or result (its id and type, about 8). Planning without it keeps more
 * than fits when turns are many and small.
 */
const framingOf = (message: Message): number =>
  4 + 8 * message.parts.reduce((n, p) => n + (p._tag === "text" ? 0 : 1), 0)

/** The history a request shows: the summaries' texts (L3's system part) and whole turns' messages. */
export interface ShownHistory {
  readonly summaries: ReadonlyArray<string>
  readonly messages: ReadonlyArray<Message>
}

/**
 * Tokens of shown history when the request's format is not known: each text with `count`, plus a
 * chat API's framing per message. Close to what an OpenAI request carries; other formats carry
 * more (an Anthropic request sends tool results as JSON strings inside JSON content blocks), so a
 * caller that knows the format passes its own count (`CompactOptions.countHistory`).
 */
export const estimateHistory =
  (count: (text: string) => number) =>
  (history: ShownHistory): number =>
    history.summaries.reduce((n, text) => n + count(text), 0) +
    history.messages.reduce((n, m) => n + count(messageText(m)) + framingOf(m), 0)

/**
 * A summary within the room compaction kept for it (`max` tokens), so the history it leaves stays
 * under the trigger: the oldest completed milestones give way first (a line says how many and
 * that the archived messages keep them), then the text is cut at a line, marked. The File System
 * State section is kept whole while it fits.
 */
export const fitSummary = (text: string, max: number, count: (text: string) => number): string => {
  if (count(text) <= max) return text
  const lines = text.split("\n")
  const milestones = lines.flatMap((l, i) => (/^\* \[✓\]/.test(l) ? [i] : []))
  const without = (k: number) => {
    const dropped = new Set(milestones.slice(0, k))
    const note = `* [✓] … ${k} earlier milestone${k === 1 ? "" : "s"} left out to keep this summary within ${max} tokens (the archived messages keep them)`
    return lines.flatMap((l, i) => (i === milestones[0] ? [note] : dropped.has(i) ? [] : [l])).join("\n")
  }
  // The fewest milestones dropped that fit: a binary search (fewer dropped, more tokens).
  if (milestones.length > 0 && count(without(milestones.length)) <= max) {
    let lo = 1
    let hi = milestones.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (count(without(mid)) <= max) hi = mid
      else lo = mid + 1
    }
    return without(lo)
  }
  // Still over: the head of the summary, cut at a line, and the File System State section whole.
  const all = milestones.length > 0 ? without(milestones.length).split("\n") : lines
  const fs = all.findIndex((l) => l.startsWith(FILE_SYSTEM_STATE_HEADING))
  const base = fs === -1 ? all : all.slice(0, fs)
  const tail = fs === -1 ? [] : all.slice(fs)
  const marker = `… (cut to keep this summary within ${max} tokens; the archived messages keep the rest)`
  const cut = (n: number, m: number) =>
    [...base.slice(0, n), marker, ...(m > 0 ? ["", ...tail.slice(0, m)] : [])].join("\n")
  /** The largest k in 0..hi with fits(k), fits being monotone. */
  const largest = (fits: (k: number) => boolean, hi: number) => {
    let lo = 0
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1
      if (fits(mid)) lo = mid
      else hi = mid - 1
    }
    return lo
  }
  const head = Math.min(2, base.length) // the title and the range it covers
  if (count(cut(head, tail.length)) <= max)
    return cut(
      largest((n) => count(cut(n, tail.length)) <= max, base.length),
      tail.length
    )
  // The File System State alone is over: the title, its heading, and as many of its lines as fit.
  return cut(
    head,
    Math.max(
      Math.min(1, tail.length),
      largest((m) => count(cut(head, m)) <= max, tail.length)
    )
  )
}

export interface CompactionPlan {
  readonly archive: ReadonlyArray<Message>
  readonly archivedTurns: ReadonlyArray<number>
  readonly keptTurns: ReadonlyArray<number>
  /** Fewer than `keepTurns` turns were kept because no more fit the budget. */
  readonly reducedForBudget: boolean
  readonly note?: string
}

/**
 * Which turns to archive. Pure and deterministic. `exceptTurn` (the running turn) and an
 * unfinished last turn are neither archived nor counted. With `budget` and `countMessages` (the
 * tokens of one turn's messages in the request), kept turns are reduced (oldest first) until their
 * tokens fit.
 */
export const planCompaction = (
  doc: HistoryDocument,
  options: {
    readonly keepTurns?: number
    readonly exceptTurn?: number
    readonly budget?: number
    readonly countMessages?: (messages: ReadonlyArray<Message>) => number
  } = {}
): CompactionPlan => {
  const keepTurns = Math.max(0, options.keepTurns ?? defaultSettings.keepTurns)
  const all = turnsOf(doc.messages.filter((m) => m.meta.archivedBy === undefined))
  // The last turn, when unfinished, is running or may be resumed: it is never archived.
  const running = all.at(-1)?.finished === false ? all.at(-1)!.turn : undefined
  const live = all.filter((t) => t.turn !== options.exceptTurn && t.turn !== running)
  const pinned = (t: Turn) => t.messages.some((m) => m.meta.pinned === true)
  let keptCount = Math.min(keepTurns, live.length)
  let reducedForBudget = false
  let note: string | undefined
  if (options.budget !== undefined && options.countMessages !== undefined) {
    const count = options.countMessages
    const tokens = (t: Turn) => count(t.messages)
    const pinnedTokens = live
      .slice(0, live.length - keptCount)
      .filter(pinned)
      .reduce((n, t) => n + tokens(t), 0)
    let keptTokens = live.slice(live.length - keptCount).reduce((n, t) => n + tokens(t), 0) + pinnedTokens
    const wanted = keptCount
    while (keptCount > 0 && keptTokens > options.budget) {
      const oldest = live[live.length - keptCount]!
      if (!pinned(oldest)) keptTokens -= tokens(oldest)
      keptCount--
      reducedForBudget = true
    }
    if (reducedForBudget) {
      note = `kept ${keptCount} whole turn${keptCount === 1 ? "" : "s"} instead of ${wanted}: no more fit ${options.budget} tokens`
    }
  }
  const keptFrom = live.length - keptCount
  const archivedTurns = live.slice(0, keptFrom).filter((t) => !pinned(t))
  const archived = new Set(archivedTurns)
  const keptTurns = live.filter((t) => !archived.has(t))
  return {
    archive: archivedTurns.flatMap((t) => t.messages),
    archivedTurns: archivedTurns.map((t) => t.turn),
    keptTurns: keptTurns.map((t) => t.turn),
    reducedForBudget,
    ...(note === undefined ? {} : { note })
  }
}

/** Marks the plan's messages archived (by id, so messages added meanwhile stay) and adds the summary. */
export const applyCompaction = (
  doc: HistoryDocument,
  plan: CompactionPlan,
  archivedBy: string,
  summary: Summary | undefined
): HistoryDocument => {
  const ids = new Set(plan.archive.map((m) => m.id))
  return {
    ...doc,
    messages: doc.messages.map((m) =>
      ids.has(m.id) && m.meta.archivedBy === undefined ? { ...m, meta: { ...m.meta, archivedBy } } : m
    ),
    compression: summary === undefined ? doc.compression : [...doc.compression, summary]
  }
}

export type CompactionEvent =
  | {
      readonly _tag: "Started"
      readonly archivedTurns: ReadonlyArray<number>
      readonly keptTurns: ReadonlyArray<number>
    }
  | { readonly _tag: "Summarizing"; readonly messages: number }
  | { readonly _tag: "FellBack"; readonly message: string }
  | { readonly _tag: "Finished"; readonly summaryId: string | undefined; readonly archivedMessages: number }
  | {
      readonly _tag: "StillOver"
      readonly estimated: number
      readonly threshold: number
      readonly message: string
    }

export interface CompactionResult {
  readonly status: "not-needed" | "compacted" | "fell-back" | "nothing-to-compact"
  readonly decision: TriggerDecision
  readonly plan?: CompactionPlan
  readonly summary?: Summary
  /** Estimated tokens after compaction (kept history + summaries + the input estimate). */
  readonly remaining?: number
  /** True when what remains still reaches the trigger: reported, not retried. */
  readonly stillOver: boolean
  readonly events: ReadonlyArray<CompactionEvent>
}

export interface CompactOptions {
  readonly sessionId: string
  readonly input: string
  /** Input tokens the provider reported for the last request. */
  readonly lastUsage: number
  /** The session's model as the registry resolves it: its window sets the trigger, its id the summary model. */
  readonly model: Pick<ModelInfo, "id" | "contextWindow">
  /** The running turn, left alone. */
  readonly exceptTurn?: number
  /** The session's history as the caller read it under the session's lock (read here otherwise). */
  readonly history?: HistoryDocument
  readonly settings?: Partial<CompactionSettings>
  /** Token counter for a new summary's room and, without `countHistory`, the history (default length / 3). */
  readonly count?: (text: string) => number
  /**
   * Tokens that shown history (summaries, whole turns) takes in the turn's requests, as the
   * request's format renders and counts it, framing included: the plan and the remaining-size check
   * count with it. Default: `estimateHistory(count)`, which knows no format; an Anthropic request
   * carries about a tenth more than it says, and a plan made with it can leave the first request
   * over the trigger.
   */
  readonly countHistory?: (history: ShownHistory) => number
  /**
   * Tokens every request of the turn carries besides history (system prompt, rules, other
   * contexts, the input, tools, the request's own framing), as a compile counts them; the history
   * kept must fit beside them (pinned turns are history: the plan counts them). Default: the input
   * alone, estimated as length / 3.
   */
  readonly fixedTokens?: number
  readonly onEvent?: (event: CompactionEvent) => Effect.Effect<void>
  readonly now?: string
}

/** Checks the trigger and, when it fires, compacts the session's history once. */
export const compact = (
  options: CompactOptions
): Effect.Effect<CompactionResult, HistoryError, HistoryStore | Summarizer> =>
  Effect.gen(() => compacting(options)).pipe(withSpan("Compaction.compact"))

/** `compact`'s work: a generator made once (a generator function made per call keeps what it closes over until a full collection, in V8). */
function* compacting(options: CompactOptions) {
  const store = yield* HistoryStore
  const summarizer = yield* Summarizer
  const settings = { ...defaultSettings, ...options.settings }
  const count = options.count ?? ((text: string) => Math.ceil(text.length / 3))
  const countHistory = options.countHistory ?? estimateHistory(count)
  const events: Array<CompactionEvent> = []
  const emit = (event: CompactionEvent) =>
    Effect.suspend(() => {
      events.push(event)
      return options.onEvent?.(event) ?? Effect.void
    })

  const doc = options.history ?? (yield* store.load(options.sessionId))
  const decision = triggerFor(doc, {
    lastUsage: options.lastUsage,
    input: options.input,
    window: options.model.contextWindow,
    settings
  })
  if (!decision.trigger) return { status: "not-needed", decision, stillOver: false, events } as const

  const fixed = options.fixedTokens ?? Math.ceil(options.input.length / 3)
  // Room for the summary about to be written: a third of the trigger, at most 2,000 tokens of
  // text (`fitSummary` holds it there), beside the summaries on file, framing included.
  const summaryReserve = Math.min(2_000, Math.floor(decision.threshold / 3))
  const summariesTokens =
    countHistory({ summaries: [...doc.compression.map((s) => s.text), ""], messages: [] }) + summaryReserve
  const plan = planCompaction(doc, {
    keepTurns: settings.keepTurns,
    ...(options.exceptTurn === undefined ? {} : { exceptTurn: options.exceptTurn }),
    budget: Math.max(0, decision.threshold - fixed - summariesTokens),
    countMessages: (messages) => countHistory({ summaries: [], messages })
  })

  const remainingAfter = (next: HistoryDocument) => {
    const view = historyView(next)
    return countHistory({ summaries: view.summaries.map((s) => s.text), messages: view.messages }) + fixed
  }
  const reportIfOver = (remaining: number) =>
    remaining >= decision.threshold
      ? emit({
          _tag: "StillOver",
          estimated: remaining,
          threshold: decision.threshold,
          message: `History still takes about ${remaining} tokens after compaction (trigger ${decision.threshold}); not compacting again.`
        }).pipe(Effect.as(true))
      : Effect.succeed(false)

  if (plan.archive.length === 0) {
    const remaining = remainingAfter(doc)
    const stillOver = yield* reportIfOver(remaining)
    return { status: "nothing-to-compact", decision, plan, remaining, stillOver, events } as const
  }

  yield* emit({ _tag: "Started", archivedTurns: plan.archivedTurns, keptTurns: plan.keptTurns })
  yield* emit({ _tag: "Summarizing", messages: plan.archive.length })
  const fromTurn = plan.archivedTurns[0]!
  const toTurn = plan.archivedTurns.at(-1)!
  const produced = yield* summarizer
    .summarize({
      messages: plan.archive,
      fromTurn,
      toTurn,
      model: options.model.id.slice(options.model.id.indexOf("/") + 1)
    })
    .pipe(
      Effect.timeoutFail({ duration: settings.summaryTimeout, onTimeout: () => "timeout" as const }),
      Effect.map(Option.some),
      Effect.catchAll((failure) =>
        emit({
          _tag: "FellBack",
          message:
            failure === "timeout" ? TIMEOUT_MESSAGE : `${failure.message}; keeping recent history only.`
        }).pipe(Effect.as(Option.none<string>()))
      )
    )

  const summaryId = `s${doc.compression.length + 1}-t${fromTurn}-${toTurn}`
  const summary: Summary | undefined = Option.match(produced, {
    onNone: () => undefined,
    onSome: (text) => ({
      id: summaryId,
      // Whatever the summarizer wrote, the File System State is filled from the tool calls.
      text: fitSummary(withFileSystemState(text, plan.archive), summaryReserve, count),
      fromTurn,
      toTurn,
      messageCount: plan.archive.length,
      ...(options.now === undefined ? {} : { createdAt: options.now })
    })
  })
  const archivedBy = summary === undefined ? `dropped-t${fromTurn}-${toTurn}` : summaryId
  const next = yield* store.modify(options.sessionId, (current) => {
    const updated = applyCompaction(current, plan, archivedBy, summary)
    return Effect.succeed([updated, updated] as const)
  })
  const remaining = remainingAfter(next)
  yield* emit({ _tag: "Finished", summaryId: summary?.id, archivedMessages: plan.archive.length })
  const stillOver = yield* reportIfOver(remaining)
  return {
    status: summary === undefined ? "fell-back" : "compacted",
    decision,
    plan,
    ...(summary === undefined ? {} : { summary }),
    remaining,
    stillOver,
    events
  } as const
}

/** `compact` as a stream of its progress events, ending when compaction ends (or failing with its error). */
export const compactStream = (
  options: Omit<CompactOptions, "onEvent">
): Stream.Stream<CompactionEvent, HistoryError, HistoryStore | Summarizer> =>
  Stream.unwrapScoped(
    Effect.gen(function* () {
      const mailbox = yield* Mailbox.make<CompactionEvent, HistoryError>()
      yield* compact({ ...options, onEvent: (event) => Effect.asVoid(mailbox.offer(event)) }).pipe(
        Effect.exit,
        Effect.flatMap((exit) => mailbox.done(Exit.asVoid(exit))),
        Effect.forkScoped
      )
      return Mailbox.toStream(mailbox)
    })
  )
