/**
 * Options several commands share: the data root they work on (each says what it does there) and
 * the services a turn needs over it.
 */
import * as Memory from "@ctxo/agent/Memory"
import * as TurnEngine from "@ctxo/agent/TurnEngine"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import * as CompileCache from "@ctxo/compiler/CompileCache"
import * as Workspace from "@ctxo/compiler/Workspace"
import * as HistoryStore from "@ctxo/history/HistoryStore"
import * as Summarizer from "@ctxo/history/Summarizer"
import * as Store from "@ctxo/store/Store"
import * as Options from "@effect/cli/Options"
import { Layer, type Option } from "effect"
import { registryLayer } from "./models.ts"

/** `--data DIR` (default ./data, the gateway's live data root), described for the command. */
export const dataOption = (description: string) =>
  Options.directory("data", { exists: "yes" }).pipe(
    Options.withPseudoName("DIR"),
    Options.withDescription(description),
    Options.withDefault("data")
  )

/**
 * The turn engine over a data root, with memory as a source of every compile (as the gateway
 * wires it), the deterministic summarizer and a compile cache owned by the command.
 */
export const engineOn = (root: string, models: Option.Option<string>) => engineOver(Store.layer(root), models)

/** The same over any store (a data root's, or one in PostgreSQL). */
export const engineOver = <E, R>(store: Layer.Layer<Store.Store, E, R>, models: Option.Option<string>) => {
  const base = Layer.mergeAll(
    Workspace.layerStore,
    HistoryStore.layerStore,
    registryLayer(models),
    Tokenizer.layer(),
    TurnEngine.seamsLive,
    Summarizer.layerDeterministic,
    CompileCache.layer
  ).pipe(Layer.provideMerge(store))
  return TurnEngine.layer.pipe(Layer.provideMerge(Memory.layer()), Layer.provideMerge(base))
}
