/**
 * The thinking map's handlers (`@ctxo/api/MapApi`): decode, call `@ctxo/compiler/MapContext`,
 * encode. The map is the session's `map.json`, read and written through the store with versions;
 * a node's context is counted for the model asked for, else the session's, else the gateway's.
 */
import { Api } from "@ctxo/api/Api"
import { nodeContext, readMap, writeMap } from "@ctxo/compiler/MapContext"
import { MAP_FILE } from "@ctxo/store/Paths"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { toApiError } from "./ErrorMapping.ts"
import { GatewayConfig } from "./GatewayConfig.ts"
import { ifMatch } from "./RequestBody.ts"

const wire = Effect.mapError(toApiError)

export const MapLive = HttpApiBuilder.group(Api, "map", (handlers) =>
  handlers
    .handle("get", ({ path }) =>
      readMap(path.id).pipe(
        // The text parsed as a map: it is a JSON object.
        Effect.map(({ text, version }) => ({
          path: MAP_FILE,
          version,
          map: JSON.parse(text) as Record<string, unknown>
        })),
        wire
      )
    )
    .handle("put", ({ path, payload, headers }) =>
      writeMap(path.id, `${JSON.stringify(payload, null, 2)}\n`, ifMatch(headers["if-match"])).pipe(wire)
    )
    .handle("nodeContext", ({ path, urlParams }) =>
      Effect.gen(function* () {
        const config = yield* GatewayConfig
        const report = yield* nodeContext({
          sessionId: path.id,
          nodeId: path.nodeId,
          defaultModel: config.model,
          ...(urlParams.model === undefined ? {} : { model: urlParams.model }),
          ...(urlParams.budget === undefined ? {} : { budget: urlParams.budget })
        }).pipe(wire)
        return {
          session: report.session,
          node: report.node,
          model: report.model,
          counting: report.counting,
          budget: report.formatted.budget,
          tokens: report.formatted.tokens,
          info: report.info,
          sections: report.formatted.sections,
          text: report.formatted.text
        }
      })
    )
)
