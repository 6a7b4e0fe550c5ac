/**
 * What moving data into a data root on disk needs beyond the store's own operations (`ctxo store
 * migrate` out of PostgreSQL): a session's record as it was (its times and state, which
 * `createSession` would set anew) and a global file at the top of the root. Meant for a root that
 * no gateway serves meanwhile: the records are kept here and `sessions.json` is written whole
 * (atomically) after each one.
 */
import { mkdir } from "node:fs/promises"
import { join, resolve } from "node:path"
import { Effect, Either } from "effect"
import { writeInside } from "./internal/safeFs.ts"
import { checkSessionId, cleanGlobalPath, INDEX_FILE } from "./Paths.ts"
import { jsonText, type SessionRecord } from "./Records.ts"
import { SessionExists, type StoreError, StoreIOError } from "./StoreErrors.ts"

export interface Importer {
  readonly putRecord: (record: SessionRecord) => Effect.Effect<void, StoreError>
  readonly putGlobalFile: (name: string, text: string) => Effect.Effect<void, StoreError>
}

/** An importer into the data root `rootDir` (created if missing), whose index starts as `existing`. */
export const fileImporter = (rootDir: string, existing: ReadonlyArray<SessionRecord> = []): Importer => {
  const root = resolve(rootDir)
  const records: Array<SessionRecord> = [...existing]
  const io = (path: string) => (e: unknown) =>
    new StoreIOError({
      path,
      operation: "import",
      reason: e instanceof Error ? ((e as NodeJS.ErrnoException).code ?? e.message) : String(e)
    })
  const write = (name: string, text: string) =>
    Effect.tryPromise({
      try: async () => {
        await mkdir(root, { recursive: true })
        await writeInside(root, name, text, () => true)
      },
      catch: io(name)
    })
  return {
    putRecord: (record) =>
      Effect.gen(function* () {
        yield* checkSessionId(record.id)
        if (records.some((r) => r.id === record.id)) return yield* new SessionExists({ sessionId: record.id })
        yield* Effect.tryPromise({
          try: () => mkdir(join(root, record.id), { recursive: true }),
          catch: io(record.id)
        })
        records.push(record)
        yield* write(INDEX_FILE, jsonText(records))
      }),
    putGlobalFile: (name, text) =>
      Effect.flatMap(
        Either.match(cleanGlobalPath(name), { onLeft: Effect.fail, onRight: Effect.succeed }),
        (clean) => write(clean, text)
      )
  }
}
