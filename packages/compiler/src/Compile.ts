/**
 * compile: a session's manifest, files and history in, the exact request for a model out, never
 * over budget, with the report of what went in and why.
 *
 * The five stages of seed 000 — resolve sources, select blocks, merge references, format, emit —
 * run as pure functions over the files read first through the sandboxed `Workspace`. The budget
 * (`@ctxo/budget`) sees every layer as units: whole blocks, whole turns (newest first, no gaps),
 * the required system prompt and input, and the final request counted whole.
 *
 * History trimming has hysteresis: when history is over its grant it is cut to 80% of it, and a
 * later compile keeps that cut (`previous.historyStartTurn`) for as long as history from there
 * still fits, so the prefix the provider caches stays the same for several turns.
 */

import { allocate } from "@ctxo/budget/Allocation"
import type { SourceInput } from "@ctxo/budget/Budget"
import { fitBudget } from "@ctxo/budget/Budget"
import type { BudgetExceeded, UnknownModel } from "@ctxo/budget/BudgetErrors"
import type { BudgetReport } from "@ctxo/budget/BudgetReport"
import type { ChatMessage } from "@ctxo/budget/ChatFormat"
import type { Unit } from "@ctxo/budget/Fit"
import { contentHash, unitLedger } from "@ctxo/budget/Fit"
import { ModelRegistry } from "@ctxo/budget/ModelRegistry"
import { Tokenizer } from "@ctxo/budget/Tokenizer"
import { messageText } from "@ctxo/history/Compaction"
import { historyView } from "@ctxo/history/HistoryView"
import type { HistoryDocument, Message } from "@ctxo/history/Message"
import { emptyHistory, HistoryDocument as HistoryDocumentSchema } from "@ctxo/history/Message"
import type { Turn } from "@ctxo/history/Turns"
import { Effect, Either, Schema } from "effect"
import type { DuplicateInput, InvalidContextKey } from "./CompilerErrors.ts"
import { InvalidManifest, UnresolvedReference } from "./CompilerErrors.ts"
import type { Composition } from "./Composer.ts"
import { compose } from "./Composer.ts"
import type { ContextSource } from "./ContextSource.ts"
import { collectAll, defaultSources } from "./ContextSource.ts"
import { memoByKey, memoByObject, memoByTag } from "./internal/memo.ts"
import type { Manifest } from "./Manifest.ts"
import { parseManifest } from "./Manifest.ts"
import { withMentionReminder } from "./Mentions.ts"
import type { ParsedReference } from "./References.ts"
import { formatReference, parseInlineReferences, parseReference, resolveReference } from "./References.ts"
import type { AnthropicRequest, Format, OpenAIMessage } from "./Render.ts"
import { openAIMessagesOf, render } from "./Render.ts"
import type { ContextUnit } from "./Sources.ts"
import { Workspace } from "./Workspace.ts"

export const DEFAULT_MODEL = "openai/gpt-4o"

/** What a compile leaves for the next compile of the same session. */
export interface CompileState {
  readonly historyStartTurn?: number
  readonly messageHashes: ReadonlyArray<string>
}

export interface CompileOptions {
  readonly sessionId: string
  /** The new user input (default: the manifest's `query`). */
  readonly query?: string
  readonly model?: string
  /** The model when neither `model` nor the manifest names one (default: DEFAULT_MODEL). */
  readonly defaultModel?: string
  readonly format?: Format
  /** Use this manifest instead of the session's `context-config.json`. */
  readonly manifest?: Manifest
  readonly previous?: CompileState
  /**
   * The session's history as the caller holds it (a gateway's history store, the replay harness),
   * instead of reading the manifest's history file.
   */
  readonly history?: HistoryDocument
  /** The collectors to run (default: `defaultSources`). */
  readonly sources?: ReadonlyArray<ContextSource>
}

export interface PrefixStats {
  /** Hash of the static layers in front of the history. */
  readonly hash: string
  /** Tokens of those layers. */
  readonly tokens: number
  /** Leading messages (and their tokens) identical to the previous compile's. */
  readonly unchangedMessages: number
  readonly unchangedTokens: number
}

export interface CompileResult {
  /** Tokens of each composed layer, in order (history: all its messages). */
  readonly layers: ReadonlyArray<{ readonly id: string; readonly tokens: number; readonly messages?: number }>
  readonly model: string
  readonly format: Format
  readonly request: unknown
  readonly composition: Composition
  readonly report: BudgetReport
  readonly prefix: PrefixStats
  readonly warnings: ReadonlyArray<string>
  readonly state: CompileState
}

export type CompileError =
  | InvalidManifest
  | UnresolvedReference
  | InvalidContextKey
  | DuplicateInput
  | UnknownModel
  | BudgetExceeded

const decodeHistoryText = Schema.decodeUnknownEither(Schema.parseJson(HistoryDocumentSchema))
// Decoded histories by their exact text: the workspace hands back the same string while the file
// is unchanged, so a warm compile does not decode thousands of messages again.
const decodedHistories = new Map<string, ReturnType<typeof decodeHistoryText>>()
const decodeHistory = (text: string) => {
  let decoded = decodedHistories.get(text)
  if (decoded === undefined) {
    decoded = decodeHistoryText(text)
    decodedHistories.set(text, decoded)
    if (decodedHistories.size > 16) decodedHistories.delete(decodedHistories.keys().next().value!)
  }
  return decoded
}
const emptyManifest = Either.getOrThrow(parseManifest("{}"))
const parseManifestOf = memoByKey(256, (text: string, file: string) => parseManifest(text, file))
const viewOf = memoByObject((doc: HistoryDocument) => historyView(doc))

/** Which budget source (seed 003 shares) a context draws from. */
const budgetSourceOf = (key: string): string =>
  key === "tools__context"
    ? "tools"
    : key === "compression__context" || key === "todo__context"
      ? "important_history"
      : key === "experience__context"
        ? "semantic"
        : key === "knowledge__context" || key === "tree__context"
          ? "knowledge"
          : "skills"

type Composed = ReturnType<typeof compose>

type CompileUnit = Unit &
  (
    | { readonly kind: "system_prompt" }
    | { readonly kind: "query" }
    | { readonly kind: "context"; readonly key: string }
    | { readonly kind: "turn"; readonly turn: Turn }
  )

// A turn's text and hash, by its message array (the same array while the history file is
// unchanged): a warm compile does not join, hash, render or count every turn again.
const turnTextOf = memoByObject((messages: ReadonlyArray<Message>) => {
  const text = messages.map(messageText).join("\n")
  return { text, hash: contentHash(text) }
})
// Tokens one rendered message adds to a request (its framing included), by tokenizer and the
// rendered object; a request's count is the sum plus the request's own framing. Tokens of a turn
// (the sum over its messages) likewise, by its message array.
const renderedTokens = memoByTag<object, number>()
const turnTokens = memoByTag<ReadonlyArray<Message>, number>()
// A context unit's tokens (as one system message), by the unit and the tokenizer.
const contextTokens = memoByTag<ContextUnit, number>()
// Hashes of rendered messages (the prefix comparison), by the rendered object.
const renderedHashOf = memoByObject((m: object) => contentHash(JSON.stringify(m)))
// A context unit's hash, by the unit (the same object while its file is unchanged).
const unitHashOf = memoByObject((u: { readonly text: string }) => contentHash(u.text))

const orElseFail = <A, E>(either: Either.Either<A, E>) =>
  Either.match(either, { onLeft: Effect.fail, onRight: Effect.succeed })

export const compile = (options: CompileOptions) =>
  Effect.gen(function* () {
    const ws = yield* Workspace
    const registry = yield* ModelRegistry
    const tokenizer = yield* Tokenizer
    const sid = options.sessionId
    const warnings: Array<string> = []
    const sessionFile = (path: string) => ws.read("session", sid, path)
    if (!(yield* ws.hasSession(sid))) {
      return yield* new UnresolvedReference({
        ref: `session ${sid}`,
        kind: "missing-file",
        reason: `the data root ${ws.root} has no session ${sid}`
      })
    }

    // --- the manifest
    let manifest = options.manifest
    if (manifest === undefined) {
      const text = yield* sessionFile("context-config.json")
      manifest =
        text === undefined
          ? emptyManifest
          : yield* orElseFail(parseManifestOf(`${sid}/context-config.json`, text))
    }

    // --- Stage 1: resolve sources (system prompt files; session prompt; rules; todo; tree; extras)
    const missingFile = (scope: "global" | "session", path: string) =>
      new UnresolvedReference({
        ref: path,
        kind: "missing-file",
        reason: `${scope === "global" ? "the data root" : `session ${sid}`} has no ${path}`
      })
    const readRequired = (scope: "global" | "session", path: string) =>
      Effect.flatMap(ws.read(scope, sid, path), (text) =>
        text === undefined ? Effect.fail(missingFile(scope, path)) : Effect.succeed(text)
      )
    const readManyRequired = (scope: "global" | "session", paths: ReadonlyArray<string>) =>
      Effect.flatMap(ws.readMany(scope, sid, paths), (texts) => {
        const missing = texts.indexOf(undefined)
        return missing === -1
          ? Effect.succeed(texts as ReadonlyArray<string>)
          : Effect.fail(missingFile(scope, paths[missing]!))
      })
    const globalPrompts: Array<string> = []
    for (const source of manifest.systemPrompt) {
      if (source.type === "global") globalPrompts.push((yield* readRequired("global", source.file)).trim())
    }

    // --- history (L3): the curated view; its summaries become compression__context
    const historyText =
      manifest.chatHistory.strategy === "none" || options.history !== undefined
        ? undefined
        : yield* sessionFile(manifest.chatHistory.source)
    const doc: HistoryDocument =
      manifest.chatHistory.strategy === "none"
        ? emptyHistory
        : options.history !== undefined
          ? options.history
          : historyText === undefined
            ? emptyHistory
            : yield* orElseFail(
                decodeHistory(historyText).pipe(
                  Either.mapLeft(
                    (e) =>
                      new InvalidManifest({
                        file: `${sid}/${manifest.chatHistory.source}`,
                        field: "(history)",
                        reason: e.message
                      })
                  )
                )
              )
    const view = viewOf(doc)
    let turns = view.turns
    if (manifest.chatHistory.strategy === "recent" && manifest.chatHistory.maxTurns !== undefined) {
      turns = turns.slice(-manifest.chatHistory.maxTurns)
    }

    // --- Stage 1 and 2 for the contexts: the collectors (session prompt, rules, todo, tree, extras,
    // profile blocks, knowledge blocks, summaries)
    const units = yield* collectAll(options.sources ?? defaultSources, {
      sessionId: sid,
      manifest,
      sessionFiles: yield* ws.list("session", sid),
      summaries: view.summaries,
      read: readRequired,
      readMany: readManyRequired,
      warn: (message) => warnings.push(message)
    })

    // --- Stage 3: merge references into the input; @file mentions get their reminder
    const query = options.query ?? manifest.query ?? ""
    const refs: Array<ParsedReference> = [...parseInlineReferences(query)]
    // The manifest's references go with the manifest's query; a new input brings its own (inline).
    for (const ref of options.query === undefined ? manifest.references : []) {
      const parsed = yield* orElseFail(parseReference(ref))
      if (!refs.some((r) => r.raw === parsed.raw)) refs.push(parsed)
    }
    const resolved: Array<string> = []
    for (const ref of refs) {
      const content = yield* ws
        .read("session", sid, ref.path)
        .pipe(
          Effect.mapError((e) => new UnresolvedReference({ ref: ref.raw, kind: e.kind, reason: e.reason }))
        )
      const r = yield* orElseFail(resolveReference(ref, content))
      if (r.warning !== undefined) warnings.push(r.warning)
      resolved.push(formatReference(r))
    }
    const input = query === "" ? "" : [withMentionReminder(query), ...resolved].join("\n\n")

    // --- model and budget
    const model = yield* registry.resolve(
      options.model ?? manifest.model ?? options.defaultModel ?? DEFAULT_MODEL
    )
    if (model.fallback !== undefined) warnings.push(model.fallback)
    const counter = yield* tokenizer.counter(model)
    const format = options.format ?? (model.provider === "anthropic" ? "anthropic" : "openai")
    const systemPrompt = globalPrompts.join("\n\n")

    // Tokens are counted per rendered message (see `renderedTokens`): a request is the sum plus its
    // own framing, exactly as `countMessages` counts it whole.
    const requestBase = counter.countMessages([])
    const messageCache = renderedTokens(counter.tokenizer)
    const messageTokens = (m: OpenAIMessage) => {
      let tokens = messageCache.get(m)
      if (tokens === undefined) {
        tokens = counter.countMessages([openAIChatMessage(m)]) - requestBase
        messageCache.set(m, tokens)
      }
      return tokens
    }
    const turnCache = turnTokens(counter.tokenizer)
    const contextCache = contextTokens(counter.tokenizer)
    const turnTokensOf = (messages: ReadonlyArray<Message>) => {
      let tokens = turnCache.get(messages)
      if (tokens === undefined) {
        tokens = 0
        for (const m of messages) for (const r of openAIMessagesOf(m)) tokens += messageTokens(r)
        turnCache.set(messages, tokens)
      }
      return tokens
    }
    const countRequest = (request: ReturnType<typeof render>, upTo?: number) => {
      if (format !== "openai") {
        const all = chatMessagesOf(request, format)
        return counter.countMessages(upTo === undefined ? all : all.slice(0, upTo))
      }
      const list = (request as { messages: ReadonlyArray<OpenAIMessage> }).messages
      let total = requestBase
      for (let i = 0; i < (upTo ?? list.length); i++) total += messageTokens(list[i]!)
      return total
    }

    // Every unit is made (and counted) once; a history cut only filters the turn units.
    const makeUnits = (historyTurns: ReadonlyArray<Turn>) => {
      // A unit's tokens are what it adds to the rendered request: its text plus the provider's
      // framing (a context is one system message; a turn its messages with their tool calls), so the
      // final exact count rarely needs repairing.
      const framed = (message: ChatMessage) => counter.countMessages([message]) - requestBase
      const framedOnce = (u: ContextUnit) => {
        const tokens = framed({ role: "system", content: u.text })
        contextCache.set(u, tokens)
        return tokens
      }
      const system: CompileUnit = {
        kind: "system_prompt",
        id: "system_prompt",
        source: "system_prompt",
        text: systemPrompt,
        tokens: framed({ role: "system", content: systemPrompt }),
        required: true
      }
      const queryUnit: CompileUnit = {
        kind: "query",
        id: "query",
        source: "user_input",
        text: input,
        tokens: framed({ role: "user", content: input }),
        required: true
      }
      const contextUnits = units.map(
        (u): CompileUnit => ({
          kind: "context",
          key: u.key,
          id: u.id,
          source: budgetSourceOf(u.key),
          text: u.text,
          hash: unitHashOf(u),
          tokens: contextCache.get(u) ?? framedOnce(u),
          ...(u.ref ? { ref: u.ref } : {})
        })
      )
      const turnUnit = (t: Turn, source: string): CompileUnit => {
        const { text, hash } = turnTextOf(t.messages)
        const tokens = turnTokensOf(t.messages)
        return { kind: "turn", turn: t, id: `turn-${t.turn}`, source, text, hash, tokens }
      }
      // Without a new input, an unfinished last turn is the running one (a step of the ReAct loop):
      // its input and steps are what the model answers, so they are required like an input.
      const last = historyTurns.at(-1)
      const running = input === "" && last !== undefined && !last.finished ? last : undefined
      const turnUnits = [...historyTurns]
        .reverse()
        .filter((t) => t !== running)
        .map((t) => turnUnit(t, "recent_history"))
      const bySource = new Map<string, Array<CompileUnit>>()
      for (const u of contextUnits) bySource.set(u.source, [...(bySource.get(u.source) ?? []), u])
      const sources: Array<SourceInput<CompileUnit>> = [
        { id: "system_prompt", required: true, units: [system] },
        {
          id: "user_input",
          required: true,
          units:
            running === undefined
              ? [queryUnit]
              : [queryUnit, { ...turnUnit(running, "user_input"), required: true }]
        },
        ...[...bySource].map(([id, list]) => ({ id, units: list })),
        { id: "recent_history", contiguous: true, units: turnUnits }
      ]
      return sources
    }

    // The fit counts the whole request, then the result is composed from the same units: the last
    // composition and its rendering are kept, so the request counted is the request returned.
    let lastComposed:
      | { readonly included: ReadonlyArray<CompileUnit>; readonly composed: Composed }
      | undefined
    const composeUnits = (included: ReadonlyArray<CompileUnit>): Composed => {
      if (
        lastComposed !== undefined &&
        lastComposed.included.length === included.length &&
        lastComposed.included.every((u, i) => u === included[i])
      )
        return lastComposed.composed
      const composed = composeFresh(included)
      lastComposed = { included, composed }
      return composed
    }
    const renderings = new WeakMap<Composition, ReturnType<typeof render>>()
    const renderOnce = (composition: Composition) => {
      let request = renderings.get(composition)
      if (request === undefined) {
        request = render(composition, format)
        renderings.set(composition, request)
      }
      return request
    }
    const composeFresh = (included: ReadonlyArray<CompileUnit>) => {
      const contexts: Record<string, string> = {}
      for (const u of included)
        if (u.kind === "context")
          contexts[u.key] = contexts[u.key] === undefined ? u.text : `${contexts[u.key]}\n\n${u.text}`
      const keptTurns = included
        .filter((u) => u.kind === "turn")
        .map((u) => (u as { turn: Turn }).turn)
        .sort((a, b) => a.turn - b.turn)
      return compose({
        policy: manifest.policy,
        systemPrompt,
        contexts,
        checkpointMessages: keptTurns.flatMap((t) => t.messages),
        ...(input === "" ? {} : { query: input }),
        process: {
          role: manifest.process.role,
          knowledge: manifest.process.knowledge,
          ...(manifest.process.enableShareContext === undefined
            ? {}
            : { enableShareContext: manifest.process.enableShareContext })
        }
      })
    }
    const countRendered = (composition: Composition) => countRequest(renderOnce(composition))
    const budgetOptions = {
      ...(manifest.budget.outputReserve === undefined
        ? {}
        : { outputReserve: manifest.budget.outputReserve }),
      ...(manifest.budget.outputReserveRatio === undefined
        ? {}
        : { outputReserveRatio: manifest.budget.outputReserveRatio })
    }
    const allSources = makeUnits(turns)
    const turnUnits = allSources.find((source) => source.id === "recent_history")!.units
    /** The sources with history from `start` on (all of it when undefined, none when null). */
    const withHistoryFrom = (start: number | null | undefined) =>
      allSources.map((source) =>
        source.id !== "recent_history" || start === undefined
          ? source
          : {
              ...source,
              units:
                start === null ? [] : source.units.filter((u) => u.kind === "turn" && u.turn.turn >= start)
            }
      )
    const fitWith = (sources: ReadonlyArray<SourceInput<CompileUnit>>) =>
      fitBudget({
        model,
        counter,
        ...budgetOptions,
        sources,
        countTotal: (included) =>
          Either.match(composeUnits(included), {
            onLeft: () => Number.POSITIVE_INFINITY,
            onRight: countRendered
          })
      })

    // Hysteresis: keep the previous cut while history from there fits its grant; when history is
    // over, cut it to 80% of the grant. The turns before a cut are in the report with the reason.
    const withCut = (refit: typeof fitted, start: number | null) => {
      const before = turnUnits.filter((u) => u.kind === "turn" && (start === null || u.turn.turn < start))
      const reason =
        start === null
          ? "no whole turn fits the history grant"
          : `before the history cut at turn ${start} (history is cut to 80% of its grant and the cut is kept while it fits)`
      return {
        ...refit,
        report: {
          ...refit.report,
          units: [...refit.report.units, ...unitLedger(before, "dropped", counter.method, reason)]
        }
      }
    }
    const historyGrant = Either.match(
      allocate({
        model: model.id,
        window: model.contextWindow,
        maxInput: model.maxInput,
        margin: counter.margin,
        ...budgetOptions,
        sources: allSources.map(({ units: list, contiguous: _, ...request }) => ({
          ...request,
          ask: list.reduce((sum, u) => sum + u.tokens, 0)
        }))
      }),
      { onLeft: () => 0, onRight: (a) => a.grants.recent_history ?? 0 }
    )
    const tokensFrom = (start: number) =>
      turnUnits.reduce((n, u) => n + (u.kind === "turn" && u.turn.turn >= start ? u.tokens : 0), 0)
    const previousStart = options.previous?.historyStartTurn
    const firstTurn = turns[0]?.turn
    let historyStartTurn = firstTurn
    let fitted: Either.Either.Right<ReturnType<typeof fitWith>>
    if (
      previousStart !== undefined &&
      firstTurn !== undefined &&
      previousStart > firstTurn &&
      turns.some((t) => t.turn >= previousStart) &&
      tokensFrom(previousStart) <= historyGrant
    ) {
      // The previous cut still fits: one fit, same cut, same cached prefix.
      historyStartTurn = previousStart
      fitted = withCut(yield* orElseFail(fitWith(withHistoryFrom(previousStart))), previousStart)
    } else {
      fitted = yield* orElseFail(fitWith(allSources))
      const droppedTurn = fitted.report.units.some(
        (u) => u.source === "recent_history" && u.status !== "included"
      )
      if (droppedTurn) {
        const grant = fitted.report.sources.find((s) => s.id === "recent_history")?.grant ?? 0
        let used = 0
        historyStartTurn = undefined
        for (const u of turnUnits) {
          used += u.tokens
          if (used > Math.floor(grant * 0.8) || u.kind !== "turn") break
          historyStartTurn = u.turn.turn
        }
        const start = historyStartTurn ?? null
        fitted = withCut(yield* orElseFail(fitWith(withHistoryFrom(start))), start)
      }
    }

    // --- Stage 4 and 5: format and emit
    const composition = yield* orElseFail(composeUnits(fitted.included))
    const request = renderOnce(composition)

    // The request's messages as rendered (anthropic: the top-level system first), each hashed once.
    const rendered: ReadonlyArray<object> =
      format === "openai"
        ? (request as { messages: ReadonlyArray<OpenAIMessage> }).messages
        : format === "anthropic"
          ? [{ system: (request as AnthropicRequest).system }, ...(request as AnthropicRequest).messages]
          : [request as object]
    const messageHashes = rendered.map((m) => renderedHashOf(m))
    const staticLayers = composition.layers.filter((_, i) =>
      composition.layers.slice(0, i + 1).every((l) => l._tag === "system")
    )
    let unchangedMessages = 0
    const previousHashes = options.previous?.messageHashes ?? []
    while (
      unchangedMessages < messageHashes.length &&
      previousHashes[unchangedMessages] === messageHashes[unchangedMessages]
    )
      unchangedMessages++
    const prefix: PrefixStats = {
      hash: contentHash(
        staticLayers.map((l) => (l._tag === "system" ? `${l.id}\n${l.text}` : "")).join("\n\n")
      ),
      tokens: staticLayers.reduce((n, l) => n + (l._tag === "system" ? counter.count(l.text) : 0), 0),
      unchangedMessages,
      unchangedTokens: countRequest(request, unchangedMessages) - requestBase
    }
    const layers = composition.layers.map((l) =>
      l._tag === "history"
        ? {
            id: l.id,
            // The included turns' tokens as the budget counted them (framing included).
            tokens: fitted.included.reduce((n, u) => n + (u.kind === "turn" ? u.tokens : 0), 0),
            messages: l.messages.length
          }
        : { id: l.id, tokens: counter.count(l.text) }
    )
    return {
      layers,
      model: model.id,
      format,
      request,
      composition,
      report: fitted.report,
      prefix,
      warnings,
      state: { ...(historyStartTurn === undefined ? {} : { historyStartTurn }), messageHashes }
    } satisfies CompileResult
  }).pipe(Effect.withSpan("Compiler.compile"))

/** One rendered OpenAI message as a chat message for counting. */
export const openAIChatMessage = (m: OpenAIMessage): ChatMessage => ({
  role: m.role,
  content: m.content,
  ...(m.role === "assistant" && m.tool_calls !== undefined
    ? {
        toolCalls: m.tool_calls.map((c) => ({
          id: c.id,
          name: c.function.name,
          arguments: c.function.arguments
        }))
      }
    : {})
})

/** A rendered request as chat messages for counting with the provider's framing. */
export const chatMessagesOf = (request: ReturnType<typeof render>, format: Format): Array<ChatMessage> => {
  if (format === "openai") {
    return (request as { messages: ReadonlyArray<OpenAIMessage> }).messages.map(openAIChatMessage)
  }
  if (format === "anthropic") {
    const r = request as {
      system: string
      messages: ReadonlyArray<{ role: "user" | "assistant"; content: unknown }>
    }
    return [
      ...(r.system === "" ? [] : [{ role: "system" as const, content: r.system }]),
      ...r.messages.map((m) => ({ role: m.role, content: JSON.stringify(m.content) }))
    ]
  }
  return [{ role: "user", content: (request as { prompt: string }).prompt }]
}
