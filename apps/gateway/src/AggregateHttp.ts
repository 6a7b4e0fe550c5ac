/**
 * `POST /api/context/aggregate` (`@ctxo/api/AggregateApi`): decode, call `@ctxo/agent/Aggregate`
 * over the caller's tenant (its store: another tenant's session is unknown, 404), encode. Each
 * session compiles with the agent's tools offered on demand, as the context preview does; the
 * model asked for, else the gateway's default (CTXO_MODEL).
 */
import { aggregate } from "@ctxo/agent/Aggregate"
import { agentTools } from "@ctxo/agent/Tools"
import { Api } from "@ctxo/api/Api"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { toApiError } from "./ErrorMapping.ts"
import { GatewayConfig } from "./GatewayConfig.ts"

export const AggregateLive = HttpApiBuilder.group(Api, "aggregate", (handlers) =>
  handlers.handle("aggregate", ({ payload }) =>
    Effect.gen(function* () {
      const config = yield* GatewayConfig
      return yield* aggregate({
        sessions: payload.sessions,
        query: payload.query,
        defaultModel: config.model,
        tools: agentTools,
        ...(payload.model === undefined ? {} : { model: payload.model }),
        ...(payload.format === undefined ? {} : { format: payload.format })
      }).pipe(Effect.mapError(toApiError))
    })
  )
)
