/**
 * Stage "resolve sources": everything a compile reads, read once through the sandboxed workspace.
 * The manifest (the session's `context-config.json` unless one is given), the global system
 * prompts, the history file (v1 or a plain array of messages) as its curated view, and the
 * collectors' context units (session prompt, rules, todo, tree, extras, profile and knowledge
 * blocks, summaries).
 */
import type { HistoryCorrupt } from "@ctxo/history/HistoryErrors"
import type { HistoryView } from "@ctxo/history/HistoryView"
import type { HistoryDocument } from "@ctxo/history/Message"
import { emptyHistory } from "@ctxo/history/Message"
import type { Turn } from "@ctxo/history/Turns"
import { Effect, Either, Option } from "effect"
import type { CompileOptions } from "../Compile.ts"
import * as CompileCache from "../CompileCache.ts"
import type { InvalidContextKey, InvalidManifest } from "../CompilerErrors.ts"
import { UnresolvedReference } from "../CompilerErrors.ts"
import type { CollectRequest } from "../ContextSource.ts"
import { collectAll, defaultSources, KnowledgeIndex } from "../ContextSource.ts"
import type { Manifest } from "../Manifest.ts"
import { parseManifest } from "../Manifest.ts"
import type { ContextUnit } from "../Sources.ts"
import type * as Workspace from "../Workspace.ts"
import { readSidecar } from "./sidecar.ts"

export interface ResolvedSources {
  readonly manifest: Manifest
  /** The global system prompt files, joined. */
  readonly systemPrompt: string
  /** The history's curated view (archived turns left out, summaries beside). */
  readonly view: HistoryView
  /** The turns the manifest's history strategy keeps, oldest first. */
  readonly turns: ReadonlyArray<Turn>
  /** Turns of the view the strategy does not keep (`chatHistory.maxTurns`). */
  readonly notOffered: ReadonlyArray<number>
  /** Turns archived by compaction (their messages are on file, out of the view). */
  readonly archivedTurns: ReadonlyArray<number>
  /**
   * Runs the collectors (seed 003 `collect(query, budget, counter)`) once the input, the model and
   * its budget are known: their units, in collector order.
   */
  readonly collect: (
    request: CollectRequest
  ) => Effect.Effect<ReadonlyArray<ContextUnit>, UnresolvedReference | InvalidContextKey>
}

const orElseFail = <A, E>(either: Either.Either<A, E>) =>
  Either.match(either, { onLeft: Effect.fail, onRight: Effect.succeed })

const emptyManifest = Either.getOrThrow(parseManifest("{}"))

/**
 * Parsed and decoded files come from `cache` by the data root, the session, the path and the exact
 * text: the workspace hands back the same string while a file is unchanged, so a warm compile does
 * not parse the manifest or decode thousands of messages again.
 */
export const resolveSources = (
  ws: Workspace.Service,
  cache: CompileCache.Service,
  options: CompileOptions,
  warn: (message: string) => void
): Effect.Effect<
  ResolvedSources,
  UnresolvedReference | InvalidManifest | InvalidContextKey | HistoryCorrupt
> => Effect.gen(() => resolving(ws, cache, options, warn))

function* resolving(
  ws: Workspace.Service,
  cache: CompileCache.Service,
  options: CompileOptions,
  warn: (message: string) => void
) {
  const sid = options.sessionId
  const sessionFile = (path: string) => ws.read("session", sid, path)
  const keyOf = (scope: "global" | "session", path: string) =>
    CompileCache.fileKey(ws.root, scope === "global" ? undefined : sid, path)
  if (!(yield* ws.hasSession(sid))) {
    return yield* new UnresolvedReference({
      ref: `session ${sid}`,
      kind: "missing-file",
      reason: `the data root ${ws.root} has no session ${sid}`
    })
  }

  let manifest = options.manifest
  if (manifest === undefined) {
    const text = yield* sessionFile("context-config.json")
    manifest =
      text === undefined
        ? emptyManifest
        : yield* orElseFail(
            cache.manifest(keyOf("session", "context-config.json"), text, `${sid}/context-config.json`)
          )
  }

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

  // History (L3): the curated view; its summaries become compression__context.
  const strategy = manifest.chatHistory.strategy
  let doc: HistoryDocument = emptyHistory
  if (strategy !== "none") {
    if (options.history !== undefined) doc = options.history
    else {
      const source = manifest.chatHistory.source
      const text = yield* sessionFile(source)
      if (text !== undefined)
        doc = yield* orElseFail(cache.history(keyOf("session", source), text, `${sid}/${source}`))
    }
  }
  const view = cache.view(doc)
  let turns = view.turns
  if (strategy === "recent" && manifest.chatHistory.maxTurns !== undefined) {
    turns = turns.slice(-manifest.chatHistory.maxTurns)
  }
  const notOffered = view.turns.slice(0, view.turns.length - turns.length).map((t) => t.turn)

  const sessionFiles = yield* ws.list("session", sid)
  const knowledgeIndex = Option.getOrUndefined(yield* Effect.serviceOption(KnowledgeIndex))
  let live: ReadonlySet<number> | undefined
  const collect = (request: CollectRequest) =>
    collectAll(options.sources ?? defaultSources, {
      ...request,
      sessionId: sid,
      manifest,
      sessionFiles,
      memory: options.memory ?? [],
      history: doc,
      ...(options.nodeContext === undefined ? {} : { nodeContext: options.nodeContext }),
      ...(options.meta === undefined ? {} : { meta: options.meta }),
      ...(knowledgeIndex === undefined ? {} : { knowledgeIndex }),
      // A set made when a source first asks (the memory source, when it has memories and a query
      // to rank them by). A function, not a getter: an object literal with a getter gets a hidden
      // class of its own in V8's old space, which kept the getter's closure, and through it the
      // whole compile, alive until the next full collection.
      isLiveTurn: (turn) => {
        live ??= new Set(view.turns.map((t) => t.turn))
        return live.has(turn)
      },
      summaries: view.summaries,
      read: readRequired,
      readMany: readManyRequired,
      readSidecar: (scope, file) =>
        readSidecar(
          cache,
          (path) => ws.read(scope, sid, path),
          file,
          (path) => keyOf(scope, path)
        ),
      knowledgeUnits: (path, content, block, sidecar) =>
        cache.knowledge(keyOf("session", path), path, content, block, sidecar),
      profileBlocks: (file, content, ids, sidecar) =>
        cache.profile(keyOf("global", file), file, content, ids, sidecar),
      warn
    })
  return {
    manifest,
    systemPrompt: globalPrompts.join("\n\n"),
    view,
    turns,
    notOffered,
    archivedTurns: cache.archivedTurns(doc),
    collect
  }
}
