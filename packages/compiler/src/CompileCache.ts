/**
 * The caches that make a warm compile cheap, owned by a layer: parsed manifests, decoded histories
 * and their views, block-id sidecars, knowledge and profile units, turn texts and hashes, token
 * counts of rendered messages, turns and contexts, hashes of rendered messages.
 *
 * Provide `layer` where compiles repeat (a gateway process, a turn engine, a replay, the CLI): the
 * second compile of an unchanged session then decodes, parses, renders and counts nothing again.
 * Without one, `compile` uses a fresh cache of its own (the same output, only cold).
 *
 * Every entry is a pure function of content: keyed caches remember one input per key (a data
 * root and a file) and answer only while the input is the same text (`===`); the others hold a
 * value per object, kept while the object lives (`WeakMap`). So tenants and sessions can share
 * one cache safely: nothing is answered from an id alone. Keyed caches are bounded (the oldest
 * key out first); per-object caches go with their objects.
 */
import type { BlockIdSidecar } from "@ctxo/blocks/BlockIds"
import { contentHash } from "@ctxo/budget/Fit"
import { messageText } from "@ctxo/history/Compaction"
import type { HistoryCorrupt } from "@ctxo/history/HistoryErrors"
import { decodeHistoryText } from "@ctxo/history/HistoryFormat"
import type { HistoryView } from "@ctxo/history/HistoryView"
import { grownView, type ViewState } from "@ctxo/history/HistoryView"
import type { HistoryDocument, Message } from "@ctxo/history/Message"
import type { Turn } from "@ctxo/history/Turns"
import { Context, type Either, Layer } from "effect"
import type { InvalidManifest, UnresolvedReference } from "./CompilerErrors.ts"
import type { MemoStats, TagEntries } from "./internal/memo.ts"
import { memoByKey, memoByObject, memoByTag } from "./internal/memo.ts"
import { decodeSidecar } from "./internal/sidecar.ts"
import type { CompileUnit } from "./internal/units.ts"
import type { Manifest } from "./Manifest.ts"
import { parseManifest } from "./Manifest.ts"
import { makeRanker } from "./Relevance.ts"
import { openAIMessageJson } from "./Render.ts"
import type { ContextUnit } from "./Sources.ts"
import { knowledgeUnits, selectProfileBlocks } from "./Sources.ts"
import type { Ranker } from "./ToolSelection.ts"

export type { MemoStats, TagEntries } from "./internal/memo.ts"

/** Bounds of the keyed caches (entries, the oldest key out first). */
export const CAPACITY = {
  manifests: 256,
  histories: 16,
  sidecars: 256,
  knowledge: 4096,
  profiles: 64
} as const

/** Hits and misses of each cache since the layer was built. */
export interface CompileCacheStats {
  readonly manifests: MemoStats
  readonly histories: MemoStats
  readonly views: MemoStats
  readonly sidecars: MemoStats
  readonly knowledge: MemoStats
  readonly profiles: MemoStats
  readonly turnTexts: MemoStats
  readonly renderedTokens: MemoStats
  readonly turnTokens: MemoStats
  readonly contextTokens: MemoStats
  readonly turnUnits: MemoStats
  readonly unitHashes: MemoStats
  readonly renderedHashes: MemoStats
}

/**
 * `key` names a file across data roots and sessions (see `fileKey`); `file` is how errors and
 * units name it. A keyed cache answers from memory only while the text (and sidecar) is the same.
 */
export interface Service {
  /** `parseManifest(text, file)`. */
  readonly manifest: (key: string, text: string, file: string) => Either.Either<Manifest, InvalidManifest>
  /** `decodeHistoryText(text, file)`: a warm compile does not decode thousands of messages again. */
  readonly history: (
    key: string,
    text: string,
    file: string
  ) => Either.Either<HistoryDocument, HistoryCorrupt>
  /** `historyView(doc)`, by the document. */
  readonly view: (doc: HistoryDocument) => HistoryView
  /** The turns of a document's archived messages, in order, by the document. */
  readonly archivedTurns: (doc: HistoryDocument) => ReadonlyArray<number>
  /** A block-id sidecar's text decoded (the same object for the same text). */
  readonly sidecar: (
    key: string,
    text: string,
    file: string
  ) => Either.Either<BlockIdSidecar, UnresolvedReference>
  /** `knowledgeUnits(path, content, block, sidecar)`: the same units while the file's text is. */
  readonly knowledge: (
    key: string,
    path: string,
    content: string,
    block: string | undefined,
    sidecar: BlockIdSidecar | undefined
  ) => Either.Either<ReadonlyArray<ContextUnit>, UnresolvedReference>
  /** `selectProfileBlocks(content, file, ids, sidecar)`, likewise. */
  readonly profile: (
    key: string,
    file: string,
    content: string,
    ids: ReadonlyArray<string>,
    sidecar: BlockIdSidecar | undefined
  ) => Either.Either<ReadonlyArray<ContextUnit>, UnresolvedReference>
  /** A turn's text and hash, by its message array (the same array while the history is). */
  readonly turnText: (messages: ReadonlyArray<Message>) => { readonly text: string; readonly hash: string }
  /** Tokens one rendered message adds to a request, by tokenizer and the rendered object. */
  readonly renderedTokens: (tokenizer: string) => TagEntries<object, number>
  /** Tokens of a turn's rendered messages, by tokenizer and its message array. */
  readonly turnTokens: (tokenizer: string) => TagEntries<ReadonlyArray<Message>, number>
  /** A context unit's tokens as one system message, by tokenizer and the unit. */
  readonly contextTokens: (tokenizer: string) => TagEntries<ContextUnit, number>
  /**
   * A turn as a unit of the budget, by tokenizer, source and flags (the tag) and the turn: the
   * same unit for the same turn object, compile after compile.
   */
  readonly turnUnits: (tag: string) => TagEntries<Turn, CompileUnit>
  /** A context unit's hash, by the unit. */
  readonly unitHash: (unit: { readonly text: string }) => string
  /** A rendered message's hash (the prefix comparison), by the rendered object. */
  readonly renderedHash: (message: object) => string
  /** Relevance with the last sets of documents indexed (`Relevance.makeRanker`). */
  readonly rank: Ranker
  readonly stats: () => CompileCacheStats
}

export class CompileCache extends Context.Tag("@ctxo/compiler/CompileCache")<CompileCache, Service>() {}

/** The key of a file for the keyed caches: its data root, and its session unless it is global. */
export const fileKey = (root: string, sessionId: string | undefined, path: string): string =>
  sessionId === undefined ? `${root}\u0000\u0000${path}` : `${root}\u0000${sessionId}\u0000${path}`

type Texted = readonly [text: string, file: string]
const sameText = (a: Texted, b: Texted) => a[0] === b[0]
type WithSidecar = readonly [content: string, sidecar: BlockIdSidecar | undefined, ...rest: Array<unknown>]
const sameContent = (a: WithSidecar, b: WithSidecar) => a[0] === b[0] && a[1] === b[1]

/**
 * Turns kept the same objects from one document to the next. Documents are immutable and a change
 * keeps the message objects before it, so a turn whose messages are the same objects as a turn of
 * an earlier view is that turn: what is cached by turn or by its message array (its text, hash and
 * tokens, its recall text) stays warm as the history grows, and a compile does not join, hash or
 * count every earlier turn again.
 */
const internTurns = () => {
  const byLast = new WeakMap<Message, Turn>()
  const same = (a: ReadonlyArray<Message>, b: ReadonlyArray<Message>) => {
    if (a.length !== b.length) return false
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
    return true
  }
  return (turns: ReadonlyArray<Turn>): ReadonlyArray<Turn> =>
    turns.map((t) => {
      const last = t.messages.at(-1)
      if (last === undefined) return t
      const earlier = byLast.get(last)
      // Most often the turn itself (the history's turns keep their objects too): nothing to compare.
      if (earlier === t) return t
      if (
        earlier !== undefined &&
        earlier.turn === t.turn &&
        earlier.finished === t.finished &&
        (earlier.messages === t.messages || same(earlier.messages, t.messages))
      )
        return earlier
      byLast.set(last, t)
      return t
    })
}

/** A new, empty set of caches. */
export const make = (): Service => {
  const manifests = memoByKey(
    CAPACITY.manifests,
    ([text, file]: Texted) => parseManifest(text, file),
    sameText
  )
  const histories = memoByKey(
    CAPACITY.histories,
    ([text, file]: Texted) => decodeHistoryText(text, file),
    sameText
  )
  const sameTurns = internTurns()
  // A session's last view by its history's first message (the same object in every document the
  // session's history grows to): the next document's view starts where it ended (`grownView`).
  // Its turns kept (interned) too: the leading turns a grown view shares with it are those, and only
  // the turns after them are looked up.
  const lastViews = new WeakMap<Message, { readonly state: ViewState; readonly turns: ReadonlyArray<Turn> }>()
  const views = memoByObject((doc: HistoryDocument) => {
    const first = doc.messages[0]
    const last = first === undefined ? undefined : lastViews.get(first)
    const state = grownView(doc, last?.state)
    const grown = state.view.turns
    let shared = 0
    if (last !== undefined) {
      const before = last.state.view.turns
      while (shared < grown.length && shared < before.length && grown[shared] === before[shared]) shared++
    }
    const turns =
      shared === 0 ? sameTurns(grown) : last!.turns.slice(0, shared).concat(sameTurns(grown.slice(shared)))
    if (first !== undefined) lastViews.set(first, { state, turns })
    return { ...state.view, turns }
  })
  const archived = memoByObject((doc: HistoryDocument) => {
    const turns = new Set<number>()
    for (const m of doc.messages) if (m.meta.archivedBy !== undefined) turns.add(m.meta.turn)
    return [...turns].sort((a, b) => a - b)
  })

  const sidecars = memoByKey(CAPACITY.sidecars, ([text, file]: Texted) => decodeSidecar(text, file), sameText)
  type KnowledgeInput = readonly [string, BlockIdSidecar | undefined, string, string | undefined]
  const knowledge = memoByKey(
    CAPACITY.knowledge,
    ([content, sidecar, path, block]: KnowledgeInput) => knowledgeUnits(path, content, block, sidecar),
    sameContent
  )
  type ProfileInput = readonly [string, BlockIdSidecar | undefined, string, ReadonlyArray<string>]
  const profiles = memoByKey(
    CAPACITY.profiles,
    ([content, sidecar, file, ids]: ProfileInput) => selectProfileBlocks(content, file, ids, sidecar),
    // The ids are part of the key; the same content and sidecar give the same blocks.
    sameContent
  )
  const turnTexts = memoByObject((messages: ReadonlyArray<Message>) => {
    const text = messages.map(messageText).join("\n")
    return { text, hash: contentHash(text) }
  })
  const renderedTokens = memoByTag<object, number>()
  const turnTokens = memoByTag<ReadonlyArray<Message>, number>()
  const contextTokens = memoByTag<ContextUnit, number>()
  const turnUnits = memoByTag<Turn, CompileUnit>()
  const unitHashes = memoByObject((u: { readonly text: string }) => contentHash(u.text))
  const renderedHashes = memoByObject((m: object) => contentHash(openAIMessageJson(m) ?? JSON.stringify(m)))
  return {
    manifest: (key, text, file) => manifests.get(key, [text, file]),
    history: (key, text, file) => histories.get(key, [text, file]),
    view: views.get,
    archivedTurns: archived.get,
    sidecar: (key, text, file) => sidecars.get(key, [text, file]),
    knowledge: (key, path, content, block, sidecar) =>
      knowledge.get(`${key}\u0000${block === undefined ? "" : `#${block}`}`, [content, sidecar, path, block]),
    profile: (key, file, content, ids, sidecar) =>
      profiles.get([key, ...ids].join("\u0000"), [content, sidecar, file, ids]),
    turnText: turnTexts.get,
    renderedTokens: renderedTokens.get,
    turnTokens: turnTokens.get,
    contextTokens: contextTokens.get,
    turnUnits: turnUnits.get,
    unitHash: unitHashes.get,
    renderedHash: renderedHashes.get,
    rank: makeRanker(),
    stats: () => ({
      manifests: manifests.stats(),
      histories: histories.stats(),
      views: views.stats(),
      sidecars: sidecars.stats(),
      knowledge: knowledge.stats(),
      profiles: profiles.stats(),
      turnTexts: turnTexts.stats(),
      renderedTokens: renderedTokens.stats(),
      turnTokens: turnTokens.stats(),
      contextTokens: contextTokens.stats(),
      turnUnits: turnUnits.stats(),
      unitHashes: unitHashes.stats(),
      renderedHashes: renderedHashes.stats()
    })
  }
}

/** One set of caches for everything compiled under this layer. */
export const layer: Layer.Layer<CompileCache> = Layer.sync(CompileCache, make)
