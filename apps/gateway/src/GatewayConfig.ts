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
 * | CTXO_UPSTREAMS | (none) | more upstreams by provider prefix, JSON: `{ "openai": { "baseUrl": "https://api.openai.com/v1", "apiKeyEnv": "OPENAI_API_KEY" }, "anthropic": { "baseUrl": "https://api.anthropic.com/v1/", "apiKeyEnv": "ANTHROPIC_API_KEY" } }`; `anthropic/claude-sonnet-4-5` goes to `anthropic` as `claude-sonnet-4-5` (`"keepPrefix": true` forwards the id whole, e.g. OpenRouter); other models go to the single upstream above, else to the first listed |
 * | CTXO_LOCAL_MODEL_PORT | (random) | the local deterministic model's port (without an upstream) |
 * | CTXO_LOCAL_MODEL_SCRIPT | (none) | a JSON file of replies the local model answers first, in order (`[{ "type": "tool_calls", "calls": [{ "id", "name", "arguments" }] }, { "type": "text", "text" }]`); after them it answers by its rule: a last user message `call NAME {json}` naming an offered tool gets that tool call, a tool result gets text |
 * | CTXO_MODEL | gpt-4o | model for sessions whose manifest names none |
 * | CTXO_MAX_BODY_BYTES | 1048576 | request bodies above this get 413 |
 * | CTXO_MAX_STEPS | 8 | tool steps per chat turn |
 * | CTXO_UPSTREAM_TIMEOUT_MS | 120000 | one upstream call in all (an answer not whole by then is a timeout) |
 * | CTXO_UPSTREAM_FIRST_BYTE_MS | 60000 | from sending a call to the first byte of its answer (capped by the total) |
 * | CTXO_UPSTREAM_IDLE_MS | 30000 | between two chunks of an answer (capped by the total) |
 * | CTXO_LOG_FORMAT | pretty | `json` for structured logs |
 * | CTXO_MEMORY_L1_MS, CTXO_MEMORY_L2_MS, CTXO_MEMORY_L3_MS | 30 min, 24 h, 7 days | lifetimes of the memory levels (L4 never expires) |
 * | CTXO_BUDGET_SHARES | seed 003's | default shares of the available budget by source, JSON: `{ "knowledge": 0.2, "tools": 0.05 }` (a session's `budget.shares` win over them; 0 switches a source off) |
 * | CTXO_MEMORY_PERSIST_MS | 600000 | the L3 → L4 timer (0: only when a session ends or on POST /api/memory/persist) |
 * | CTXO_RUN_MAX_REFLECTIONS | 3 | reflections of a plan-execute-reflect run (then it answers with what it has) |
 * | CTXO_RUN_MAX_STEPS | 8 | specialist steps of a run (further steps are skipped) |
 * | CTXO_RUN_SPECIALIST_BUDGET | 8000 | tokens of a specialist's request (its context and step) |
 * | CTXO_WEB_DIR | apps/web/dist of this repository | the workbench page's built files, served at `/` |
 * | CTXO_DATABASE_URL | (none) | PostgreSQL instead of the data folder: `postgres://user:password@host:5432/database` (`@ctxo/store-pg/Database`: also CTXO_DATABASE_POOL_SIZE, CTXO_DATABASE_LOCK_CONNECTIONS) |
 */
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { parseScript, type Reply } from "@ctxo/agent/FakeUpstream"
import type { NamedUpstream } from "@ctxo/agent/ModelClient"
import { DEFAULT_LIMITS } from "@ctxo/agent/Orchestrator"
import * as V8Tuning from "@ctxo/agent/V8Tuning"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import type { RunLimits } from "@ctxo/store/Runs"
import * as SessionCache from "@ctxo/store/SessionCache"
import { type DatabaseOptions, optionsConfig as databaseConfig } from "@ctxo/store-pg/DatabaseConfig"
import { Config, ConfigError, Context, Effect, Either, Layer, Option, Redacted } from "effect"
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
  /** Limits of a plan-execute-reflect run (CTXO_RUN_*). */
  readonly runLimits: RunLimits
  readonly upstreamTimeoutMs: number
  readonly upstreamFirstByteMs: number
  readonly upstreamIdleMs: number
  readonly logFormat: "json" | "pretty"
  /** API keys and their tenants (CTXO_API_KEYS, CTXO_API_KEYS_FILE); none: one tenant, no auth. */
  readonly apiKeys: ReadonlyArray<{ readonly key: string; readonly tenant: string }>
  /** The key of the management endpoints (CTXO_ADMIN_KEY). */
  readonly adminKey: Option.Option<Redacted.Redacted<string>>
  /** Concurrent requests per tenant before 429 (CTXO_TENANT_MAX_CONCURRENT). */
  readonly tenantMaxConcurrent: number
  /** Upstreams by provider prefix (CTXO_UPSTREAMS). */
  readonly upstreams?: ReadonlyArray<NamedUpstream>
  /** The local model's port (CTXO_LOCAL_MODEL_PORT). */
  readonly localModelPort?: number
  /** The local model's scripted replies (CTXO_LOCAL_MODEL_SCRIPT, read at start). */
  readonly localModelScript?: ReadonlyArray<Reply>
  /** Default shares by source (CTXO_BUDGET_SHARES); a manifest's `budget.shares` win over them. */
  readonly budgetShares?: Readonly<Record<string, number>>
  /** PostgreSQL instead of the data folder (CTXO_DATABASE_URL); undefined: the file store. */
  readonly database?: DatabaseOptions
  /** Memory lifetimes and the L3 → L4 timer (default: `Memory.defaultSettings`, every 10 minutes). */
  readonly memory?: {
    readonly ttl: { readonly L1: number; readonly L2: number; readonly L3: number }
    /** 0: no timer. */
    readonly persistMs: number
  }
  /** The workbench page's built files (CTXO_WEB_DIR; default: apps/web/dist of this repository). */
  readonly webDir?: string
  /**
   * How far the JavaScript heap may grow past its live objects before a full collection, in percent
   * (CTXO_HEAP_GROWING_PERCENT, V8's --heap-growing-percent; 0: V8's own sizing, up to four times).
   */
  readonly heapGrowingPercent?: number
  /**
   * V8's allocation-site pretenuring (CTXO_ALLOCATION_SITE_PRETENURING; default false: off, which
   * took a long session's turn p99 from 35-42 to 22-27 ms through the gateway; `V8Tuning`).
   */
  readonly allocationSitePretenuring?: boolean
  /**
   * What the gateway keeps of its sessions between requests, in bytes (CTXO_SESSION_CACHE_MB):
   * every tenant's decoded histories, journal states, memory's turns and the engine's last compiles
   * together (`SessionCache`); a session it lets go is read again when asked.
   */
  readonly sessionCacheBytes?: number
}

export class GatewayConfig extends Context.Tag("@ctxo/gateway/GatewayConfig")<GatewayConfig, Settings>() {}

const exampleData = fileURLToPath(new URL("../../../fixtures/data", import.meta.url))

/** The heap's growth past its live objects before a full collection (percent; `V8Tuning`). */
export const DEFAULT_HEAP_GROWING_PERCENT = V8Tuning.DEFAULT_HEAP_GROWING_PERCENT

/** A duration setting in milliseconds: a positive integer. */
const milliseconds = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: "a positive number of milliseconds", validation: (ms) => ms > 0 }),
    Config.withDefault(fallback)
  )

export const settings = Config.all({
  port: Config.port("PORT").pipe(Config.withDefault(8787)),
  host: Config.string("HOST").pipe(Config.withDefault("127.0.0.1")),
  dataDir: Config.string("CTXO_DATA_DIR").pipe(Config.withDefault("./data")),
  seedDir: Config.string("CTXO_SEED_DIR").pipe(Config.withDefault(exampleData)),
  webDir: Config.option(Config.string("CTXO_WEB_DIR")).pipe(Config.map(Option.getOrUndefined)),
  upstreamBaseUrl: Config.option(Config.string("CTXO_UPSTREAM_BASE_URL")),
  // An empty key is no key (an unset variable in a .env file or a CI job).
  upstreamApiKey: Config.option(Config.redacted("CTXO_UPSTREAM_API_KEY")).pipe(
    Config.map(Option.filter((key) => Redacted.value(key).trim() !== ""))
  ),
  model: Config.string("CTXO_MODEL").pipe(Config.withDefault("gpt-4o")),
  maxBodyBytes: Config.integer("CTXO_MAX_BODY_BYTES").pipe(Config.withDefault(1_048_576)),
  maxSteps: Config.integer("CTXO_MAX_STEPS").pipe(Config.withDefault(8)),
  runLimits: Config.all({
    maxReflections: Config.integer("CTXO_RUN_MAX_REFLECTIONS").pipe(
      Config.validate({ message: "0 or more reflections", validation: (n) => n >= 0 }),
      Config.withDefault(DEFAULT_LIMITS.maxReflections)
    ),
    maxSteps: Config.integer("CTXO_RUN_MAX_STEPS").pipe(
      Config.validate({ message: "1 or more specialist steps", validation: (n) => n >= 1 }),
      Config.withDefault(DEFAULT_LIMITS.maxSteps)
    ),
    specialistBudget: Config.integer("CTXO_RUN_SPECIALIST_BUDGET").pipe(
      Config.validate({ message: "at least 256 tokens", validation: (n) => n >= 256 }),
      Config.withDefault(DEFAULT_LIMITS.specialistBudget)
    )
  }),
  upstreamTimeoutMs: milliseconds("CTXO_UPSTREAM_TIMEOUT_MS", 120_000),
  upstreamFirstByteMs: milliseconds("CTXO_UPSTREAM_FIRST_BYTE_MS", 60_000),
  upstreamIdleMs: milliseconds("CTXO_UPSTREAM_IDLE_MS", 30_000),
  logFormat: Config.literal("json", "pretty")("CTXO_LOG_FORMAT").pipe(Config.withDefault("pretty" as const)),
  heapGrowingPercent: Config.integer("CTXO_HEAP_GROWING_PERCENT").pipe(
    Config.validate({
      message: "0 (V8's own) or a percent from 10 to 300",
      validation: (p) => p === 0 || (p >= 10 && p <= 300)
    }),
    Config.withDefault(DEFAULT_HEAP_GROWING_PERCENT)
  ),
  allocationSitePretenuring: Config.boolean("CTXO_ALLOCATION_SITE_PRETENURING").pipe(
    Config.withDefault(false)
  ),
  sessionCacheBytes: Config.integer("CTXO_SESSION_CACHE_MB").pipe(
    Config.validate({ message: "at least 1 (megabytes)", validation: (mb) => mb >= 1 }),
    Config.map((mb) => mb * 1024 * 1024),
    Config.withDefault(SessionCache.DEFAULT_MAX_BYTES)
  ),
  memory: Config.all({
    ttl: Config.all({
      L1: milliseconds("CTXO_MEMORY_L1_MS", 30 * 60_000),
      L2: milliseconds("CTXO_MEMORY_L2_MS", 24 * 3_600_000),
      L3: milliseconds("CTXO_MEMORY_L3_MS", 7 * 24 * 3_600_000)
    }),
    persistMs: Config.integer("CTXO_MEMORY_PERSIST_MS").pipe(
      Config.validate({
        message: "0 (no timer) or a positive number of milliseconds",
        validation: (ms) => ms >= 0
      }),
      Config.withDefault(600_000)
    )
  })
})

/**
 * A setting whose value is a JSON object: unset or blank gives `empty`; otherwise the object's
 * entries go to `parse`, and any problem is the variable's one-sentence error.
 */
const jsonObjectConfig = <A>(
  name: string,
  expected: string,
  empty: A,
  parse: (
    entries: ReadonlyArray<[string, unknown]>,
    invalid: (reason: string) => Either.Either<never, ConfigError.ConfigError>
  ) => Either.Either<A, ConfigError.ConfigError>
) =>
  Config.option(Config.string(name)).pipe(
    Config.mapOrFail((text): Either.Either<A, ConfigError.ConfigError> => {
      if (Option.isNone(text) || text.value.trim() === "") return Either.right(empty)
      const invalid = (reason: string) => Either.left(ConfigError.InvalidData([name], reason))
      let parsed: unknown
      try {
        parsed = JSON.parse(text.value)
      } catch (e) {
        return invalid(`not JSON (${(e as Error).message})`)
      }
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
        return invalid(`expected ${expected}`)
      return parse(Object.entries(parsed), invalid)
    })
  )

/** `CTXO_UPSTREAMS`: `{ "<prefix>": { "baseUrl", "apiKeyEnv"?, "keepPrefix"? } }`, each key read from its variable. */
const upstreamsConfig = jsonObjectConfig<ReadonlyArray<NamedUpstream>>(
  "CTXO_UPSTREAMS",
  '{ "<provider>": { "baseUrl": "...", "apiKeyEnv": "..." } }',
  [],
  (entries, invalid) => {
    const out: Array<NamedUpstream> = []
    for (const [name, value] of entries) {
      const u = value as { baseUrl?: unknown; apiKeyEnv?: unknown; keepPrefix?: unknown } | null
      if (typeof u?.baseUrl !== "string" || !/^https?:\/\//.test(u.baseUrl))
        return invalid(`${name}.baseUrl must be an http(s) URL`)
      if (u.apiKeyEnv !== undefined && typeof u.apiKeyEnv !== "string")
        return invalid(`${name}.apiKeyEnv must name an environment variable`)
      const key = typeof u.apiKeyEnv === "string" ? process.env[u.apiKeyEnv]?.trim() : undefined
      if (typeof u.apiKeyEnv === "string" && (key === undefined || key === ""))
        return invalid(`${name}.apiKeyEnv names ${u.apiKeyEnv}, which is not set`)
      out.push({
        name,
        baseUrl: u.baseUrl,
        apiKey: key === undefined ? Option.none() : Option.some(Redacted.make(key)),
        ...(u.keepPrefix === true ? { keepPrefix: true } : {})
      })
    }
    return Either.right(out)
  }
)

/** `CTXO_BUDGET_SHARES`: `{ "<source>": <fraction 0..1> }`, or an error naming the source and its value. */
const sharesConfig = jsonObjectConfig<Record<string, number> | undefined>(
  "CTXO_BUDGET_SHARES",
  '{ "<source>": <share from 0 to 1> }, e.g. { "knowledge": 0.2 }',
  undefined,
  (entries, invalid) => {
    for (const [source, share] of entries)
      if (typeof share !== "number" || !(share >= 0 && share <= 1))
        return invalid(`${source}: ${JSON.stringify(share)} is not a share from 0 to 1`)
    return Either.right(Object.fromEntries(entries) as Record<string, number>)
  }
)

/** `CTXO_LOCAL_MODEL_SCRIPT`: the file's replies, or an error naming the file and the problem. */
const localScriptConfig = Config.option(Config.string("CTXO_LOCAL_MODEL_SCRIPT")).pipe(
  Config.mapOrFail((path) => {
    if (Option.isNone(path)) return Either.right(undefined)
    try {
      return Either.right(parseScript(readFileSync(path.value, "utf8"), path.value))
    } catch (e) {
      return Either.left(ConfigError.InvalidData(["CTXO_LOCAL_MODEL_SCRIPT"], (e as Error).message))
    }
  })
)

/**
 * The gateway's settings; invalid ones fail with one sentence naming the variable and the field
 * (a custom model in `CTXO_MODELS` without its tokenizer included), never a stack trace.
 */
export const layer = Layer.effect(
  GatewayConfig,
  Effect.gen(function* () {
    const { webDir, ...s } = yield* settings
    const keys = yield* Config.all({
      list: Config.option(Config.redacted("CTXO_API_KEYS")),
      file: Config.option(Config.string("CTXO_API_KEYS_FILE")),
      admin: Config.option(Config.redacted("CTXO_ADMIN_KEY")).pipe(
        Config.map(Option.filter((key) => Redacted.value(key).trim() !== ""))
      ),
      max: Config.integer("CTXO_TENANT_MAX_CONCURRENT").pipe(Config.withDefault(16))
    })
    const apiKeys = yield* readKeys(keys.list, keys.file)
    const upstreams = yield* upstreamsConfig
    const localModelPort = yield* Config.option(Config.port("CTXO_LOCAL_MODEL_PORT"))
    const localModelScript = yield* localScriptConfig
    const budgetShares = yield* sharesConfig
    const database = yield* databaseConfig
    // The model registry as the services will build it: its error now, as one sentence.
    yield* Layer.build(ModelRegistry.layerConfig([])).pipe(
      Effect.scoped,
      Effect.catchTag("InvalidModelConfig", (e) =>
        Effect.fail(ConfigError.InvalidData(["CTXO_MODELS"], e.message))
      )
    )
    return {
      ...s,
      apiKeys,
      adminKey: keys.admin,
      tenantMaxConcurrent: keys.max,
      upstreams,
      ...(Option.isSome(localModelPort) ? { localModelPort: localModelPort.value } : {}),
      ...(localModelScript === undefined ? {} : { localModelScript }),
      ...(budgetShares === undefined ? {} : { budgetShares }),
      ...(webDir === undefined ? {} : { webDir }),
      ...(Option.isSome(database) ? { database: database.value } : {})
    } satisfies Settings
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
    runLimits: DEFAULT_LIMITS,
    upstreamTimeoutMs: 10_000,
    upstreamFirstByteMs: 10_000,
    upstreamIdleMs: 10_000,
    logFormat: "pretty",
    apiKeys: [],
    adminKey: Option.none(),
    tenantMaxConcurrent: 16,
    ...overrides
  })
