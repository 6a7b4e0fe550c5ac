/**
 * A session's thinking map through its store (`map.json`, read and written with versions like any
 * session file), and one node's context formatted for a model: what the gateway's
 * `/api/sessions/:id/map` endpoints and `ctxo map` both call. The formatting is `ThinkingMap`'s
 * (pure); this module only reads, writes and picks the budget.
 */
import { availableInput, DEFAULT_SHARES } from "@ctxo/budget/Allocation"
import { ModelRegistry } from "@ctxo/budget/ModelRegistry"
import { Tokenizer } from "@ctxo/budget/Tokenizer"
import { HistoryStore } from "@ctxo/history/HistoryStore"
import { MANIFEST_FILE, MAP_FILE } from "@ctxo/store/Paths"
import type { FileInfo } from "@ctxo/store/Store"
import { Store } from "@ctxo/store/Store"
import { Effect, Option } from "effect"
import { CompileDefaults, DEFAULT_MODEL } from "./Compile.ts"
import { type Manifest, parseManifest } from "./Manifest.ts"
import type { ContextInfo, FormattedContext, ThinkingMap } from "./ThinkingMap.ts"
import { contextInfo, formatContext, MAP_SHARE, MapNotFound, parseMap } from "./ThinkingMap.ts"

const mapFile = (sessionId: string) => `${sessionId}/${MAP_FILE}`

/** A session's map: parsed, with the file's text and version (for If-Match). */
export const readMap = Effect.fn("MapContext.readMap")(function* (sessionId: string) {
  const store = yield* Store
  yield* store.getSession(sessionId)
  const file = yield* store
    .readFile(sessionId, MAP_FILE)
    .pipe(
      Effect.catchTag("FileNotFound", () =>
        Effect.fail(new MapNotFound({ session: sessionId, file: MAP_FILE }))
      )
    )
  const map: ThinkingMap = yield* parseMap(file.content, mapFile(sessionId))
  return { map, text: file.content, version: file.version }
})

/**
 * Writes a session's map after checking it (`InvalidMap` names the node and the field; nothing is
 * written then); `ifMatch` is the version the writer read ("" when it must not exist yet).
 */
export const writeMap = Effect.fn("MapContext.writeMap")(function* (
  sessionId: string,
  text: string,
  ifMatch?: string
) {
  const store = yield* Store
  yield* store.getSession(sessionId)
  yield* parseMap(text, mapFile(sessionId))
  const written: FileInfo = yield* store.writeFile(
    sessionId,
    MAP_FILE,
    text,
    ifMatch === undefined ? {} : { ifMatch }
  )
  return written
})

export interface NodeContextReport {
  readonly session: string
  readonly node: string
  /** The model counted for (the one asked for, else the session manifest's, else the default). */
  readonly model: string
  /** How its tokens were counted (`exact`, or an estimate for models without their tokenizer). */
  readonly counting: "exact" | "estimate"
  readonly info: ContextInfo
  readonly formatted: FormattedContext
}

/** The session's manifest, when it has a valid one (the map's context only borrows its model and shares). */
const manifestOf = (sessionId: string) =>
  Effect.gen(function* () {
    const store = yield* Store
    const file = yield* store
      .readFile(sessionId, MANIFEST_FILE)
      .pipe(Effect.catchTag("FileNotFound", () => Effect.succeed(undefined)))
    if (file === undefined) return undefined
    const manifest: Manifest = yield* parseManifest(file.content, `${sessionId}/${MANIFEST_FILE}`)
    return manifest
  })

/**
 * One node's `ContextInfo` and its seven sections, counted for a model. The budget is `budget`
 * when given, else what `tree__context` gets in a compile for that model: the knowledge share
 * (the session's `budget.shares`, the deployment's, the default) of the model's input budget.
 */
export const nodeContext = Effect.fn("MapContext.nodeContext")(function* (options: {
  readonly sessionId: string
  readonly nodeId: string
  readonly model?: string
  /** The model when neither `model` nor the session's manifest names one (default: DEFAULT_MODEL). */
  readonly defaultModel?: string
  readonly budget?: number
}) {
  const { sessionId, nodeId } = options
  const { map } = yield* readMap(sessionId)
  const history = yield* (yield* HistoryStore).load(sessionId)
  const info = yield* contextInfo({ map, nodeId, history, file: mapFile(sessionId) })
  const manifest = yield* manifestOf(sessionId)
  const model = yield* (yield* ModelRegistry).resolve(
    options.model ?? manifest?.model ?? options.defaultModel ?? DEFAULT_MODEL
  )
  const counter = yield* (yield* Tokenizer).counter(model)
  const defaults = Option.getOrUndefined(yield* Effect.serviceOption(CompileDefaults))
  const share =
    manifest?.budget.shares?.[MAP_SHARE] ?? defaults?.shares?.[MAP_SHARE] ?? DEFAULT_SHARES[MAP_SHARE] ?? 0
  const { available } = availableInput({
    window: model.contextWindow,
    maxInput: model.maxInput,
    margin: counter.margin,
    ...(manifest?.budget.outputReserve === undefined ? {} : { outputReserve: manifest.budget.outputReserve }),
    ...(manifest?.budget.outputReserveRatio === undefined
      ? {}
      : { outputReserveRatio: manifest.budget.outputReserveRatio })
  })
  const budget = options.budget ?? Math.floor(share * available)
  const report: NodeContextReport = {
    session: sessionId,
    node: nodeId,
    model: model.name,
    counting: counter.method,
    info,
    formatted: formatContext(info, { budget, count: (text) => counter.count(text) })
  }
  return report
})
