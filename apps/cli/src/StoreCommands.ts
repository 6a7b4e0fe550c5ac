/**
 * `ctxo store migrate --from SOURCE --to TARGET`: moves a data root into PostgreSQL, or out of it
 * into a folder. One side is a data root folder, the other a `postgres://` URL; every tenant moves
 * (the root itself as `default`, each `tenants/<tenant>/` folder as its tenant). The target must be
 * empty. Afterwards each session's next request is compiled from the source and from the target
 * (as `ctxo compile` compiles it) and the two must be the same, byte for byte; a session whose
 * requests differ fails the command, naming it. The source is left as it was.
 */
import { readdir, stat } from "node:fs/promises"
import { join, resolve } from "node:path"
import { agentTools } from "@ctxo/agent/Tools"
import * as TurnEngine from "@ctxo/agent/TurnEngine"
import { DEFAULT_MODEL } from "@ctxo/compiler/Compile"
import { fileImporter } from "@ctxo/store/FileImport"
import { TENANTS_DIR } from "@ctxo/store/Paths"
import * as Store from "@ctxo/store/Store"
import * as Database from "@ctxo/store-pg/Database"
import * as PgStore from "@ctxo/store-pg/PgStore"
import * as Transfer from "@ctxo/store-pg/Transfer"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Console, Data, Effect, Either, Layer, type Option, Redacted } from "effect"
import type { CommandHelp, Example } from "./internal/help.ts"
import { modelsFileOption } from "./internal/models.ts"
import { engineOver } from "./internal/options.ts"

/** The tenant of a data root's top folder (the gateway's without API keys). */
const DEFAULT_TENANT = "default"

const isUrl = (value: string) => /^postgres(ql)?:\/\//i.test(value)

/** What `--from` and `--to` name cannot be moved between: one sentence saying what can. */
export class MigrateRefused extends Data.TaggedError("MigrateRefused")<{ readonly reason: string }> {
  override get message() {
    return this.reason
  }
}

/** A session whose next request compiles differently after the move. */
export class CompiledRequestsDiffer extends Data.TaggedError("CompiledRequestsDiffer")<{
  readonly tenant: string
  readonly sessionId: string
  readonly detail: string
}> {
  override get message() {
    return `The move changed what session ${this.sessionId} (tenant ${this.tenant}) compiles: ${this.detail}. The target keeps what was written; the source is unchanged.`
  }
}

const from = Options.text("from").pipe(
  Options.withPseudoName("DIR|URL"),
  Options.withDescription(
    "What to move: a data root folder (as the gateway's CTXO_DATA_DIR; its tenants/<tenant>/ folders move as their tenants) or a PostgreSQL URL (postgres://user:password@host:5432/database)."
  )
)
const to = Options.text("to").pipe(
  Options.withPseudoName("URL|DIR"),
  Options.withDescription(
    "Where to: an empty PostgreSQL database (its schema is created) or an empty (or new) data root folder. One of --from and --to is a folder, the other a URL."
  )
)

/** The tenants of a data root folder: its top (`default`) and each folder under tenants/. */
const folderTenants = (root: string) =>
  Effect.promise(async () => {
    const under = await readdir(join(root, TENANTS_DIR), { withFileTypes: true }).catch(() => [])
    return [DEFAULT_TENANT, ...under.filter((e) => e.isDirectory()).map((e) => e.name)]
  })

const folderOf = (root: string, tenant: string) =>
  tenant === DEFAULT_TENANT ? root : join(root, TENANTS_DIR, tenant)

/** What each session's next request compiles to (or the error it fails with), in `store`. */
const compiledIn = (store: Store.Service, sessions: ReadonlyArray<string>, models: Option.Option<string>) =>
  Effect.flatMap(TurnEngine.TurnEngine, (engine) =>
    Effect.forEach(sessions, (sessionId) =>
      engine.preview({ sessionId, defaultModel: DEFAULT_MODEL, tools: agentTools }).pipe(
        Effect.either,
        Effect.map((result) =>
          Either.isRight(result)
            ? JSON.stringify(result.right.request)
            : `error ${result.left._tag}: ${result.left.message}`
        )
      )
    )
  ).pipe(Effect.provide(engineOver(Layer.succeed(Store.Store, store), models)))

/** Moves every tenant between the folder and the database of `Database`, then compares compiles. */
const move = (args: {
  readonly toDatabase: boolean
  readonly folder: string
  readonly models: Option.Option<string>
}) =>
  Effect.gen(function* () {
    const { toDatabase, folder } = args
    const db = yield* Database.Database
    const tenants = toDatabase
      ? yield* folderTenants(folder)
      : [...new Set([DEFAULT_TENANT, ...(yield* PgStore.tenants)])]
    const sides = yield* Effect.forEach(tenants, (tenant) =>
      Effect.gen(function* () {
        const inDatabase = PgStore.makeWith(db, { root: folderOf(folder, tenant), tenant })
        const inFolder = yield* Store.makeScoped(folderOf(folder, tenant))
        const target: Transfer.Target = toDatabase
          ? {
              store: inDatabase,
              importer: PgStore.importerWith(db, tenant),
              label: `${db.label} (tenant ${tenant})`
            }
          : {
              store: inFolder,
              importer: fileImporter(folderOf(folder, tenant)),
              label: tenant === DEFAULT_TENANT ? folder : folderOf(folder, tenant)
            }
        return { tenant, source: toDatabase ? inFolder : inDatabase, target }
      })
    )
    // Every target empty before anything is written.
    for (const side of sides) {
      const there = yield* Transfer.isEmpty(side.target.store)
      if (there.sessions > 0 || there.files > 0)
        return yield* new Transfer.TargetNotEmpty({ target: side.target.label, ...there })
    }
    let sessions = 0
    for (const side of sides) {
      const moved = yield* Transfer.copy(side.source, side.target)
      if (moved.sessions === 0 && moved.globalFiles === 0 && side.tenant !== DEFAULT_TENANT) continue
      sessions += moved.sessions
      yield* Console.log(
        `tenant ${side.tenant}: ${moved.sessions} session${moved.sessions === 1 ? "" : "s"} (${moved.files} files, ${moved.histories} histories), ${moved.globalFiles} global file${moved.globalFiles === 1 ? "" : "s"} moved to ${side.target.label}`
      )
      const ids = (yield* side.source.listSessions).map((s) => s.id)
      const before = yield* compiledIn(side.source, ids, args.models)
      const after = yield* compiledIn(side.target.store, ids, args.models)
      for (const [i, id] of ids.entries())
        if (before[i] !== after[i])
          return yield* new CompiledRequestsDiffer({
            tenant: side.tenant,
            sessionId: id,
            detail: `${before[i]!.slice(0, 80)}... became ${after[i]!.slice(0, 80)}...`
          })
    }
    yield* Console.log(
      `${sessions} session${sessions === 1 ? "" : "s"} moved from ${toDatabase ? folder : db.label} to ${toDatabase ? db.label : folder}; each compiles the same request as before the move`
    )
  }).pipe(Effect.scoped)

const migrate = Command.make(
  "migrate",
  {
    from,
    to,
    models: modelsFileOption(
      "The compiles that check the move (each session before and after) use these models."
    )
  },
  (args) =>
    Effect.gen(function* () {
      const toDatabase = isUrl(args.to)
      if (isUrl(args.from) === toDatabase)
        return yield* new MigrateRefused({
          reason:
            "One of --from and --to must be a data root folder and the other a postgres:// URL (to move between two folders, copy the folder; between two databases, use pg_dump)."
        })
      const folder = resolve(toDatabase ? args.from : args.to)
      if (toDatabase) {
        const isFolder = yield* Effect.promise(() =>
          stat(folder).then(
            (s) => s.isDirectory(),
            () => false
          )
        )
        if (!isFolder)
          return yield* new MigrateRefused({ reason: `--from ${args.from} is not a data root folder.` })
      }
      return yield* move({ toDatabase, folder, models: args.models }).pipe(
        Effect.provide(
          Database.layer({
            url: Redacted.make(toDatabase ? args.to : args.from),
            poolSize: 4,
            lockConnections: 4,
            applicationName: "ctxo store migrate"
          })
        )
      )
    })
).pipe(
  Command.withDescription(
    "Move a data root into PostgreSQL, or out of it into a folder: sessions with their files, history, tool results, runs, tasks and memory, the global files, the root's memory and the task distributions, every tenant. The target must be empty; each session's next request is compiled before and after the move and must be the same."
  )
)

export const storeCommand = Command.make("store").pipe(
  Command.withDescription(
    "Where the gateway keeps its data: a data root folder (the default) or PostgreSQL (CTXO_DATABASE_URL); move between the two."
  ),
  Command.withSubcommands([migrate])
)

export const storeExamples: ReadonlyArray<Example> = [
  {
    says: "Move the gateway's data root into PostgreSQL:",
    command: "ctxo store migrate --from data --to postgres://postgres@127.0.0.1:5432/ctxo"
  }
]

export const storeSubcommands: ReadonlyArray<CommandHelp> = [
  {
    command: migrate,
    examples: [
      {
        says: "Into PostgreSQL (the schema is created; the database must hold no ctxo data yet):",
        command: "ctxo store migrate --from data --to postgres://postgres@127.0.0.1:5432/ctxo"
      },
      {
        says: "And back out into a new folder:",
        command: "ctxo store migrate --from postgres://postgres@127.0.0.1:5432/ctxo --to data-copy"
      }
    ]
  }
]
