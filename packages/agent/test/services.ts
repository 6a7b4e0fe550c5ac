/**
 * What the agent's tests run on: every service over one store (a memory store, or files), with
 * the turn engine, the session controller and the memory levels, and histories written as turns.
 */
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import * as Workspace from "@ctxo/compiler/Workspace"
import * as HistoryStore from "@ctxo/history/HistoryStore"
import type { HistoryDocument } from "@ctxo/history/Message"
import * as Summarizer from "@ctxo/history/Summarizer"
import { beginTurn, finishTurn } from "@ctxo/history/Turns"
import * as Store from "@ctxo/store/Store"
import { Layer } from "effect"
import * as Controller from "../src/Controller.ts"
import * as Memory from "../src/Memory.ts"
import * as SessionEvents from "../src/SessionEvents.ts"
import * as TurnEngine from "../src/TurnEngine.ts"

/** A history file's text of finished turns, each an input and its answer. */
export const historyOf = (turns: ReadonlyArray<readonly [string, string]>): string => {
  let doc: HistoryDocument = { format: "ctxo.history/v1", messages: [], compression: [] }
  for (const [input, answer] of turns) {
    const b = beginTurn(doc, { input })
    doc = finishTurn(b.doc, b.turn, answer).doc
  }
  return JSON.stringify(doc)
}

/** The services a turn reads and writes through, over `store` (models: registry overrides). */
export const baseOver = (store: Store.Service, models?: ModelRegistry.ModelsConfig) =>
  Layer.mergeAll(
    Layer.succeed(Store.Store, store),
    Layer.succeed(HistoryStore.HistoryStore, HistoryStore.fromStore(store)),
    Layer.succeed(Workspace.Workspace, Workspace.fromStore(store)),
    Summarizer.layerDeterministic,
    ModelRegistry.layer(models === undefined ? {} : { overrides: [{ origin: "test", config: models }] }),
    Tokenizer.layer(),
    TurnEngine.seamsLive,
    SessionEvents.layer
  )

/** The turn engine, the controller and the memory levels over `store`, with the base services. */
export const servicesOver = (store: Store.Service, models?: ModelRegistry.ModelsConfig) => {
  const base = baseOver(store, models)
  return Layer.mergeAll(TurnEngine.layer, Controller.layer).pipe(
    Layer.provideMerge(Layer.merge(Memory.layer(), base)),
    Layer.provideMerge(base)
  )
}
