/**
 * The gateway's settings, read through Effect `Config` (environment variables):
 *
 * | name | default | what |
 * |---|---|---|
 * | PORT | 8787 | HTTP port |
 * | HOST | 127.0.0.1 | interface to listen on |
 * | CTXO_DATA_DIR | ./data | the data root (seeded with the example data when empty) |
 * | CTXO_SEED_DIR | fixtures/data of this repository | example data for an empty data root |
 * | CTXO_UPSTREAM_BASE_URL | (none) | an OpenAI-compatible API (https://api.openai.com/v1, vLLM, ...) |
 * | CTXO_UPSTREAM_API_KEY | (none) | its key; without one the local deterministic model answers |
 * | CTXO_MODEL | gpt-4o | model for sessions whose manifest names none |
 * | CTXO_MAX_BODY_BYTES | 1048576 | request bodies above this get 413 |
 * | CTXO_MAX_STEPS | 8 | tool steps per chat turn |
 * | CTXO_UPSTREAM_TIMEOUT_MS | 120000 | one upstream call |
 * | CTXO_LOG_FORMAT | pretty | `json` for structured logs |
 */
import { fileURLToPath } from "node:url"
import { Config, Context, Effect, Layer, Option, Redacted } from "effect"

export interface Settings {
  readonly port: number
  readonly host: string
  readonly dataDir: string
  readonly seedDir: string
  readonly upstreamBaseUrl: Option.Option<string>
  readonly upstreamApiKey: Option.Option<Redacted.Redacted<string>>
  readonly model: string
  readonly maxBodyBytes: number
  readonly maxSteps: number
  readonly upstreamTimeoutMs: number
  readonly logFormat: "json" | "pretty"
}

export class GatewayConfig extends Context.Tag("@ctxo/gateway/GatewayConfig")<GatewayConfig, Settings>() {}

const exampleData = fileURLToPath(new URL("../../../fixtures/data", import.meta.url))

export const settings = Config.all({
  port: Config.port("PORT").pipe(Config.withDefault(8787)),
  host: Config.string("HOST").pipe(Config.withDefault("127.0.0.1")),
  dataDir: Config.string("CTXO_DATA_DIR").pipe(Config.withDefault("./data")),
  seedDir: Config.string("CTXO_SEED_DIR").pipe(Config.withDefault(exampleData)),
  upstreamBaseUrl: Config.option(Config.string("CTXO_UPSTREAM_BASE_URL")),
  // An empty key is no key (an unset variable in a .env file or a CI job).
  upstreamApiKey: Config.option(Config.redacted("CTXO_UPSTREAM_API_KEY")).pipe(
    Config.map(Option.filter((key) => Redacted.value(key).trim() !== ""))
  ),
  model: Config.string("CTXO_MODEL").pipe(Config.withDefault("gpt-4o")),
  maxBodyBytes: Config.integer("CTXO_MAX_BODY_BYTES").pipe(Config.withDefault(1_048_576)),
  maxSteps: Config.integer("CTXO_MAX_STEPS").pipe(Config.withDefault(8)),
  upstreamTimeoutMs: Config.integer("CTXO_UPSTREAM_TIMEOUT_MS").pipe(Config.withDefault(120_000)),
  logFormat: Config.literal("json", "pretty")("CTXO_LOG_FORMAT").pipe(Config.withDefault("pretty" as const))
})

export const layer: Layer.Layer<GatewayConfig, import("effect/ConfigError").ConfigError> = Layer.effect(
  GatewayConfig,
  Effect.map(settings, (s): Settings => s)
)

export const layerTest = (
  overrides: Partial<Settings> & Pick<Settings, "dataDir">
): Layer.Layer<GatewayConfig> =>
  Layer.succeed(GatewayConfig, {
    port: 0,
    host: "127.0.0.1",
    seedDir: exampleData,
    upstreamBaseUrl: Option.none(),
    upstreamApiKey: Option.none(),
    model: "gpt-4o",
    maxBodyBytes: 1_048_576,
    maxSteps: 8,
    upstreamTimeoutMs: 10_000,
    logFormat: "pretty",
    ...overrides
  })
