/**
 * Moves one tenant's data from a store into another, empty one (`ctxo store migrate`, and the
 * gateway seeding an empty database with the example data): the sessions' records as they are
 * (times and states), every file a session lists, its history (the document, not the file store's
 * journal), full tool results, runs, tasks and memory, then the global files, the root's memory,
 * the task distributions and the knowledge index. Everything goes through the stores' own
 * operations, so the target's rules apply to what arrives; only a record and a global file are
 * written through the target's `Importer`.
 */
import type { Importer } from "@ctxo/store/FileImport"
import { HISTORY_FILE, RUN_ID, RUNS_DIR, TOOL_RESULTS_DIR } from "@ctxo/store/Paths"
import { jsonText } from "@ctxo/store/Records"
import type { Service } from "@ctxo/store/Store"
import type { StoreError } from "@ctxo/store/StoreErrors"
import { Data, Effect, Either } from "effect"

/** The target of a move already holds data: nothing was written. */
export class TargetNotEmpty extends Data.TaggedError("TargetNotEmpty")<{
  readonly target: string
  readonly sessions: number
  readonly files: number
}> {
  override get message() {
    return `${this.target} is not empty (${this.sessions} session${this.sessions === 1 ? "" : "s"}, ${this.files} global file${this.files === 1 ? "" : "s"}): move into an empty data root or database`
  }
}

export interface Target {
  readonly store: Service
  readonly importer: Importer
  /** How the target is named in messages (a folder, `host:port/database` and the tenant). */
  readonly label: string
}

export interface Moved {
  readonly sessions: number
  readonly files: number
  readonly histories: number
  readonly globalFiles: number
}

/** Whether `store` has no session and no global file. */
export const isEmpty = (store: Service) =>
  Effect.map(Effect.all([store.listSessions, store.list("global", "")]), ([sessions, files]) => ({
    sessions: sessions.length,
    files: files.length
  }))

/** Copies everything of `from` into `to`, which must be empty. */
export const copy = (from: Service, to: Target): Effect.Effect<Moved, StoreError | TargetNotEmpty> =>
  Effect.gen(function* () {
    const there = yield* isEmpty(to.store)
    if (there.sessions > 0 || there.files > 0)
      return yield* new TargetNotEmpty({ target: to.label, ...there })
    let files = 0
    let histories = 0
    const records = yield* from.listSessions
    for (const record of records) {
      const id = record.id
      yield* to.importer.putRecord(record)
      for (const file of yield* from.listFiles(id)) {
        const path = file.path
        if (path === HISTORY_FILE) {
          // The document (without the file store's journal bookkeeping); as written when not JSON.
          const json = yield* Effect.either(from.readHistoryJson(id))
          const text =
            Either.isRight(json) && json.right !== undefined
              ? jsonText(json.right)
              : yield* from.readHistory(id)
          if (text !== undefined) {
            yield* to.store.writeHistory(id, text)
            histories++
          }
        } else if (
          path.startsWith(`${TOOL_RESULTS_DIR}/`) &&
          path.endsWith(".json") &&
          !path.slice(TOOL_RESULTS_DIR.length + 1).includes("/")
        ) {
          const callId = path.slice(TOOL_RESULTS_DIR.length + 1, -".json".length)
          const text = yield* from.readToolResult(id, callId)
          if (text !== undefined) yield* to.store.writeToolResult(id, callId, text)
        } else if (path.startsWith(`${RUNS_DIR}/`)) {
          const runId = path.slice(RUNS_DIR.length + 1, -".json".length)
          if (path.endsWith(".json") && RUN_ID.test(runId))
            yield* to.store.writeRun(yield* from.readRun(id, runId))
        } else {
          const content = (yield* from.readFile(id, path)).content
          yield* to.store.writeFile(id, path, content)
        }
        files++
      }
    }
    const globals = yield* from.list("global", "")
    for (const name of globals) {
      const text = yield* from.read("global", "", name)
      if (text !== undefined) yield* to.importer.putGlobalFile(name, text)
    }
    const memory = yield* from.readGlobalMemory
    if (memory.length > 0) yield* to.store.updateGlobalMemory(() => memory)
    for (const distribution of yield* from.listDistributions) yield* to.store.putDistribution(distribution)
    const index = yield* from.readKnowledgeIndex
    if (index !== undefined) yield* to.store.writeKnowledgeIndex(index)
    return { sessions: records.length, files, histories, globalFiles: globals.length }
  })
