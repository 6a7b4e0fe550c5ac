/**
 * A session's history for people (`@ctxo/api/HistoryApi`): its turns as stored with what a model
 * sees of each message, summaries with the turns they archived, pin, exclude and restore through
 * `@ctxo/history/HistoryView` under the history store's lock; and the request the last turn sent
 * first, compiled again (`GET /api/sessions/:id/context-preview/previous`).
 */
import { Memory } from "@ctxo/agent/Memory"
import { agentTools } from "@ctxo/agent/Tools"
import { ContextCompiler } from "@ctxo/agent/TurnEngine"
import { Api } from "@ctxo/api/Api"
import { NotFound } from "@ctxo/api/ApiErrors"
import type { HistoryListing, HistoryMessage, HistoryTurn } from "@ctxo/api/HistoryApi"
import type { MemoryItem } from "@ctxo/compiler/ContextSource"
import { MessageNotFound } from "@ctxo/history/HistoryErrors"
import { HistoryStore } from "@ctxo/history/HistoryStore"
import { excludeMessage, historyView, pinMessage, restoreMessage } from "@ctxo/history/HistoryView"
import { type HistoryDocument, type Message, textOf } from "@ctxo/history/Message"
import { turnsOf } from "@ctxo/history/Turns"
import { Store } from "@ctxo/store/Store"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Either, Option } from "effect"
import { toApiError, toPreview } from "./ErrorMapping.ts"
import { GatewayConfig } from "./GatewayConfig.ts"

const wire = Effect.mapError(toApiError)

/** What a model sees instead of a curated message: the text its placeholder puts in. */
const placeholderOf = (curated: Message | undefined): string | undefined => {
  if (curated === undefined) return undefined
  for (const part of curated.parts) {
    if (part._tag === "text") return part.text
    if (part._tag === "tool-result" && typeof part.data === "string") return part.data
  }
  return undefined
}

const messageView = (m: Message, curated: ReadonlyMap<string, Message>): HistoryMessage => {
  const placeholder = m.meta.dismissed === undefined ? undefined : placeholderOf(curated.get(m.id))
  return {
    id: m.id,
    role: m.role,
    parts: m.parts,
    pinned: m.meta.pinned === true,
    ...(m.meta.kind === undefined ? {} : { kind: m.meta.kind }),
    ...(m.meta.step === undefined ? {} : { step: m.meta.step }),
    ...(m.meta.dismissed === undefined ? {} : { dismissed: m.meta.dismissed }),
    ...(placeholder === undefined ? {} : { placeholder }),
    ...(m.meta.archivedBy === undefined ? {} : { archivedBy: m.meta.archivedBy }),
    ...(m.meta.references === undefined ? {} : { references: m.meta.references }),
    ...(m.meta.usage === undefined ? {} : { usage: m.meta.usage }),
    ...(m.meta.createdAt === undefined ? {} : { createdAt: m.meta.createdAt })
  }
}

/** Every message with what a model sees of it (curated messages' placeholders, archived ones too). */
const curatedOf = (doc: HistoryDocument): ReadonlyMap<string, Message> => {
  const unarchived = {
    ...doc,
    messages: doc.messages.map(({ meta: { archivedBy: _, ...meta }, ...m }) => ({ ...m, meta }))
  }
  return new Map(historyView(unarchived).messages.map((m) => [m.id, m]))
}

export const listing = (sessionId: string, doc: HistoryDocument): HistoryListing => {
  const curated = curatedOf(doc)
  const turns = turnsOf(doc.messages).map((t): HistoryTurn => {
    const archived = t.messages.every((m) => m.meta.archivedBy !== undefined)
    return {
      turn: t.turn,
      finished: t.finished,
      pinned: t.messages.some((m) => m.meta.pinned === true),
      ...(archived ? { archivedBy: t.messages[0]!.meta.archivedBy! } : {}),
      messages: t.messages.map((m) => messageView(m, curated))
    }
  })
  const summaries = doc.compression.map((s) => ({
    ...s,
    turns: [...new Set(doc.messages.filter((m) => m.meta.archivedBy === s.id).map((m) => m.meta.turn))].sort(
      (a, b) => a - b
    )
  }))
  return { sessionId, turns, summaries }
}

/** Applies a curation to the session's history under its lock; the changed message or turn back. */
const curate = <A>(
  sessionId: string,
  change: (doc: HistoryDocument) => Either.Either<HistoryDocument, MessageNotFound>,
  view: (doc: HistoryDocument) => A
) =>
  Effect.gen(function* () {
    yield* (yield* Store).getSession(sessionId)
    const history = yield* HistoryStore
    return yield* history.modify(sessionId, (doc) =>
      Either.match(change(doc), {
        onLeft: Effect.fail,
        onRight: (next) => Effect.succeed([view(next), next] as const)
      })
    )
  }).pipe(wire)

const messageOf = (messageId: string) => (doc: HistoryDocument) => {
  const message = doc.messages.find((m) => m.id === messageId)!
  return messageView(message, curatedOf(doc))
}

/** Pins a turn by its input (any of its messages, for a turn without one); unpins every message. */
const pinTurn = (doc: HistoryDocument, turn: number, pinned: boolean) => {
  const messages = doc.messages.filter((m) => m.meta.turn === turn)
  if (messages.length === 0)
    return Either.left(
      new MessageNotFound({ messageId: `turn ${turn}`, reason: "no such turn in this history" })
    )
  const archived = messages.find((m) => m.meta.archivedBy !== undefined)
  if (pinned && archived !== undefined)
    return Either.left(
      new MessageNotFound({
        messageId: `turn ${turn}`,
        reason: `compaction archived it into ${archived.meta.archivedBy}; a pin keeps a turn out of later compactions, it does not bring one back`
      })
    )
  if (pinned) {
    const target = messages.find((m) => m.meta.kind === "input") ?? messages[0]!
    return pinMessage(doc, target.id, true)
  }
  let next: Either.Either<HistoryDocument, MessageNotFound> = Either.right(doc)
  for (const m of messages)
    if (m.meta.pinned === true) next = Either.flatMap(next, (d) => pinMessage(d, m.id, false))
  return next
}

const turnOf = (sessionId: string, turn: number) => (doc: HistoryDocument) =>
  listing(sessionId, doc).turns.find((t) => t.turn === turn)!

export const HistoryLive = HttpApiBuilder.group(Api, "history", (handlers) =>
  handlers
    .handle("list", ({ path }) =>
      Effect.gen(function* () {
        yield* (yield* Store).getSession(path.id)
        return listing(path.id, yield* (yield* HistoryStore).load(path.id))
      }).pipe(wire)
    )
    .handle("pinTurn", ({ path, payload }) =>
      curate(path.id, (doc) => pinTurn(doc, path.turn, payload.pinned ?? true), turnOf(path.id, path.turn))
    )
    .handle("exclude", ({ path, payload }) =>
      curate(
        path.id,
        (doc) => excludeMessage(doc, path.messageId, payload.reason ?? ""),
        messageOf(path.messageId)
      )
    )
    .handle("restore", ({ path }) =>
      curate(path.id, (doc) => restoreMessage(doc, path.messageId), messageOf(path.messageId))
    )
)

/** Memories that could not have been there before `turn`: made from this session's turn or later. */
const before = (sessionId: string, turn: number) => (item: MemoryItem) =>
  !item.sources.every((s) => s.session === sessionId && (s.turn ?? 0) >= turn)

/**
 * The request the session's last turn sent first: its input and references over the history
 * before it, compiled as a turn compiles (the agent's tools, memory), with today's files.
 */
export const previousRequest = (
  path: { readonly id: string },
  urlParams: {
    readonly model?: string | undefined
    readonly format?: "openai" | "anthropic" | "react" | undefined
  }
) =>
  Effect.gen(function* () {
    const store = yield* Store
    const config = yield* GatewayConfig
    const compiler = yield* ContextCompiler
    yield* store.getSession(path.id).pipe(wire)
    const doc = yield* (yield* HistoryStore).load(path.id).pipe(wire)
    const last = turnsOf(doc.messages).at(-1)
    if (last === undefined)
      return yield* new NotFound({
        tag: "NoTurnYet",
        message: `Session ${path.id} has no turn yet, so there is no previous request to compare with`
      })
    const input = last.messages.find((m) => m.meta.kind === "input") ?? last.messages[0]!
    const memory = yield* Effect.serviceOption(Memory)
    const items = Option.isNone(memory)
      ? []
      : yield* memory.value.sources(path.id).pipe(Effect.orElseSucceed(() => []))
    const kept = items.filter(before(path.id, last.turn))
    const result = yield* compiler
      .compile({
        sessionId: path.id,
        history: { ...doc, messages: doc.messages.filter((m) => m.meta.turn < last.turn) },
        defaultModel: config.model,
        query: textOf(input),
        tools: agentTools,
        ...(input.meta.references === undefined ? {} : { references: input.meta.references }),
        ...(kept.length === 0 ? {} : { memory: kept }),
        ...(urlParams.model === undefined ? {} : { model: urlParams.model }),
        ...(urlParams.format === undefined ? {} : { format: urlParams.format })
      })
      .pipe(wire)
    return toPreview(result)
  })
