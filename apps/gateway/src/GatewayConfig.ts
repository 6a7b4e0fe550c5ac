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
import { readKeys } from "./Keys.ts"

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
  /** API keys and their tenants (CTXO_API_KEYS, CTXO_API_KEYS_FILE); none: one tenant, no auth. */
  readonly apiKeys: ReadonlyArray<{ readonly key: string; readonly tenant: string }>
  /** The key of the management endpoints (CTXO_ADMIN_KEY). */
  readonly adminKey: Option.Option<Redacted.Redacted<string>>
  /** Concurrent requests per tenant before 429 (CTXO_TENANT_MAX_CONCURRENT). */
  readonly tenantMaxConcurrent: number
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

export const layer = Layer.effect(
  GatewayConfig,
  Effect.gen(function* () {
    const s = yield* settings
    const keys = yield* Config.all({
      list: Config.option(Config.redacted("CTXO_API_KEYS")),
      file: Config.option(Config.string("CTXO_API_KEYS_FILE")),
      admin: Config.option(Config.redacted("CTXO_ADMIN_KEY")).pipe(
        Config.map(Option.filter((key) => Redacted.value(key).trim() !== ""))
      ),
      max: Config.integer("CTXO_TENANT_MAX_CONCURRENT").pipe(Config.withDefault(16))
    })
    const apiKeys = yield* readKeys(keys.list, keys.file)
    return { ...s, apiKeys, adminKey: keys.admin, tenantMaxConcurrent: keys.max } satisfies Settings
  })
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
    apiKeys: [],
    adminKey: Option.none(),
    tenantMaxConcurrent: 16,
    ...overrides
  })
