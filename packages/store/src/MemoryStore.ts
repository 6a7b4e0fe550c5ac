/**
 * A data root held in memory, with the same naming rules, refusals, versions and per-session lock
 * as the store on disk: the replay harness, stateless compiles and tests use it. History has no
 * journal here: a change is applied to messages.json's text at once.
 */
import { Effect, Either, Layer } from "effect"
import { applyPatch, foldJournal, type HistoryPatch } from "./HistoryJournal.ts"
import { contentOf, nextText, readRefusal, versionCheck, versionOf } from "./internal/fileEdits.ts"
import {
  checkPath,
  checkSessionId,
  cleanGlobalPath,
  cleanPath,
  HISTORY_FILE,
  isHistoryFile,
  MEMORY_FILE,
  RUN_ID,
  RUNS_DIR,
  runPath,
  TASKS_FILE,
  toolResultPath
} from "./Paths.ts"
import {
  type Distribution,
  decodeMemory,
  decodeTasks,
  jsonText,
  type MemoryEntry,
  type SessionRecord
} from "./Records.ts"
import { decodeRun, type EnhancedState } from "./Runs.ts"
import * as SessionCache from "./SessionCache.ts"
import type { FileInfo, Service } from "./Store.ts"
import { newRecord, patchRecord, Store, sessionLocks, withDistribution } from "./Store.ts"
import {
  CorruptFile,
  FileNotFound,
  PathRefused,
  RunNotFound,
  SessionExists,
  SessionNotFound,
  type StoreError
} from "./StoreErrors.ts"

export interface MemoryFiles {
  /** Files at the top of the data root (profile.md, system-prompt.md, ...). */
  readonly global?: Readonly<Record<string, string>>
  /** Each session's files by path. */
  readonly sessions?: Readonly<Record<string, Readonly<Record<string, string>>>>
}

let instances = 0

const fromEither = <A, E>(either: Either.Either<A, E>): Effect.Effect<A, E> =>
  Either.match(either, { onLeft: Effect.fail, onRight: Effect.succeed })

export const makeMemory = (files: MemoryFiles = {}, root = "(memory)"): Service => {
  const now = () => new Date().toISOString()
  const global = new Map(Object.entries(files.global ?? {}))
  const sessions = new Map<
    string,
    { record: SessionRecord; files: Map<string, { text: string; at: string }> }
  >()
  for (const [id, content] of Object.entries(files.sessions ?? {}))
    sessions.set(id, {
      record: newRecord(id, "", undefined, new Date(0).toISOString()),
      files: new Map(
        Object.entries(content).map(([path, text]) => [path, { text, at: new Date(0).toISOString() }])
      )
    })
  let distributions: ReadonlyArray<Distribution> = []
  let globalMemory: ReadonlyArray<MemoryEntry> = []
  let knowledgeIndex: string | undefined
  const key = `${root}#${instances++}`
  const withSessionLock = sessionLocks(key)
  const sessionOf = (id: string) =>
    Effect.flatMap(checkSessionId(id), (clean) => {
      const found = sessions.get(clean)
      return found === undefined ? Effect.fail(new SessionNotFound({ sessionId: id })) : Effect.succeed(found)
    })
  const cleanFor = (scope: "global" | "session", path: string) =>
    Either.match(scope === "global" ? cleanGlobalPath(path) : cleanPath(path), {
      onLeft: Effect.fail,
      onRight: Effect.succeed
    })
  const read = (scope: "global" | "session", sessionId: string, path: string) =>
    Effect.gen(function* () {
      const clean = yield* cleanFor(scope, path)
      if (scope === "global") return global.get(clean)
      yield* checkSessionId(sessionId)
      const refused = readRefusal(clean)
      if (refused !== undefined) return yield* refused
      return sessions.get(sessionId)?.files.get(clean)?.text
    })
  // Each session's history decoded once per text (the JSON handed out is the same object meanwhile).
  const histories = new Map<string, { readonly text: string; readonly json: unknown }>()
  const historyJson = (sessionId: string) =>
    Effect.gen(function* () {
      const text = yield* read("session", sessionId, HISTORY_FILE)
      if (text === undefined) return undefined
      const hit = histories.get(sessionId)
      if (hit?.text === text) return hit.json
      let parsed: unknown
      try {
        parsed = JSON.parse(text)
      } catch (e) {
        const reason = e instanceof Error ? e.message.replace(/\s+/g, " ").slice(0, 120) : "syntax error"
        return yield* new CorruptFile({
          path: `${sessionId}/${HISTORY_FILE}`,
          reason: `(root): not valid JSON (${reason})`
        })
      }
      const json = Either.getOrThrow(foldJournal(parsed, [])).json
      histories.set(sessionId, { text, json })
      return json
    })
  const put = (sessionId: string, path: string, text: string) =>
    Effect.map(sessionOf(sessionId), (s) => {
      s.files.set(path, { text, at: now() })
    })
  const info = (path: string, text: string, at: string): FileInfo => ({
    path,
    size: Buffer.byteLength(text, "utf8"),
    version: versionOf(text),
    modifiedAt: at
  })

  const service: Service = {
    root,
    scope: Effect.succeed(key),
    cache: SessionCache.make(),
    listSessions: Effect.sync(() => [...sessions.values()].map((s) => s.record)),
    createSession: (input) =>
      Effect.gen(function* () {
        const id = input.id ?? `s-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`
        yield* checkSessionId(id)
        if (sessions.has(id)) return yield* new SessionExists({ sessionId: id })
        if (global.has(id))
          return yield* new PathRefused({ path: id, reason: "a file of the data root has this name" })
        const record: SessionRecord = newRecord(id, input.concept, input.metadata, now())
        sessions.set(id, { record, files: new Map() })
        return record
      }),
    getSession: (id) => Effect.map(sessionOf(id), (s) => s.record),
    updateSession: (id, patch) =>
      withSessionLock(
        id,
        Effect.map(sessionOf(id), (s) => {
          s.record = patchRecord(s.record, patch, now())
          return s.record
        })
      ),
    deleteSession: (id) =>
      withSessionLock(
        id,
        Effect.flatMap(sessionOf(id), () =>
          Effect.sync(() => {
            sessions.delete(id)
            histories.delete(id)
          })
        )
      ),
    listFiles: (sessionId) =>
      Effect.map(sessionOf(sessionId), (s) =>
        [...s.files.entries()]
          .map(([path, f]) => info(path, f.text, f.at))
          .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
      ),
    readFile: (sessionId, path, range) =>
      Effect.gen(function* () {
        const scope = sessionId === undefined ? "global" : "session"
        const clean = yield* cleanFor(scope, path)
        const entry =
          sessionId === undefined
            ? Effect.succeed(
                global.has(clean) ? { text: global.get(clean)!, at: new Date(0).toISOString() } : undefined
              )
            : Effect.map(sessionOf(sessionId), (s) => s.files.get(clean))
        const refused = sessionId === undefined ? undefined : readRefusal(clean)
        if (refused !== undefined) return yield* refused
        const file = yield* entry
        if (file === undefined) return yield* new FileNotFound({ path: clean })
        return yield* fromEither(contentOf(clean, file.text, file.at, range))
      }),
    writeFile: (sessionId, path, content, options = {}) =>
      withSessionLock(
        sessionId,
        Effect.gen(function* () {
          const s = yield* sessionOf(sessionId)
          const clean = yield* checkPath(path)
          const next = yield* fromEither(nextText(clean, s.files.get(clean)?.text, content, options))
          const at = now()
          s.files.set(clean, { text: next, at })
          return info(clean, next, at)
        })
      ),
    deleteFile: (sessionId, path, ifMatch) =>
      withSessionLock(
        sessionId,
        Effect.gen(function* () {
          const s = yield* sessionOf(sessionId)
          const clean = yield* checkPath(path)
          if (isHistoryFile(clean))
            return yield* new PathRefused({
              path: clean,
              reason: "history files are removed with their session only"
            })
          const current = s.files.get(clean)?.text
          if (current === undefined) return yield* new FileNotFound({ path: clean })
          const conflict = versionCheck(clean, current, ifMatch)
          if (conflict !== undefined) return yield* conflict
          s.files.delete(clean)
        })
      ),
    withSessionLock,
    hasSession: (sessionId) => Effect.map(checkSessionId(sessionId), (id) => sessions.has(id)),
    read,
    readMany: (scope, sessionId, paths) => Effect.forEach(paths, (path) => read(scope, sessionId, path)),
    list: (scope, sessionId) =>
      scope === "global"
        ? Effect.sync(() => [...global.keys()].sort())
        : Effect.map(checkSessionId(sessionId), (id) => [...(sessions.get(id)?.files.keys() ?? [])].sort()),
    readHistory: (sessionId) => read("session", sessionId, HISTORY_FILE),
    writeHistory: (sessionId, text) => withSessionLock(sessionId, put(sessionId, HISTORY_FILE, text)),
    readHistoryJson: historyJson,
    updateHistory: <A, E>(
      sessionId: string,
      f: (json: unknown) => Effect.Effect<readonly [A, HistoryPatch | undefined], E>
    ) =>
      withSessionLock(
        sessionId,
        Effect.gen(function* () {
          yield* checkSessionId(sessionId)
          const json = yield* historyJson(sessionId)
          const [value, patch] = yield* f(json)
          yield* sessionOf(sessionId)
          if (patch === undefined) return [value, json] as const
          // The patch as a reader of its JSON text would get it, applied.
          const applied = applyPatch(json, JSON.parse(JSON.stringify(patch)))
          if (Either.isLeft(applied))
            return yield* Effect.dieMessage(`history patch of ${sessionId} does not fit: ${applied.left}`)
          const next = applied.right
          const text = jsonText(next)
          yield* put(sessionId, HISTORY_FILE, text)
          histories.set(sessionId, { text, json: next })
          return [value, next as unknown] as const
        })
      ),
    writeToolResult: (sessionId, callId, text) =>
      withSessionLock(
        sessionId,
        Effect.as(put(sessionId, toolResultPath(callId), text), toolResultPath(callId))
      ),
    readToolResult: (sessionId, callId) => read("session", sessionId, toolResultPath(callId)),
    readTasks: (sessionId) =>
      Effect.flatMap(sessionOf(sessionId), (s) => {
        const text = s.files.get(TASKS_FILE)?.text
        return text === undefined
          ? Effect.succeed([])
          : fromEither(decodeTasks(text, `${sessionId}/${TASKS_FILE}`))
      }),
    writeTasks: (sessionId, tasks) => withSessionLock(sessionId, put(sessionId, TASKS_FILE, jsonText(tasks))),
    readMemory: (sessionId) =>
      Effect.flatMap(sessionOf(sessionId), (s) => {
        const text = s.files.get(MEMORY_FILE)?.text
        return text === undefined
          ? Effect.succeed([])
          : fromEither(decodeMemory(text, `${sessionId}/${MEMORY_FILE}`))
      }),
    updateMemory: (sessionId, update) =>
      withSessionLock(
        sessionId,
        Effect.gen(function* () {
          const s = yield* sessionOf(sessionId)
          const text = s.files.get(MEMORY_FILE)?.text
          const before =
            text === undefined ? [] : yield* fromEither(decodeMemory(text, `${sessionId}/${MEMORY_FILE}`))
          const after = update(before)
          if (after !== before) yield* put(sessionId, MEMORY_FILE, jsonText(after))
          return after
        })
      ),
    readGlobalMemory: Effect.sync(() => globalMemory),
    updateGlobalMemory: (update) =>
      Effect.sync(() => {
        globalMemory = update(globalMemory)
        return globalMemory
      }),
    readRun: (sessionId, runId) =>
      Effect.flatMap(sessionOf(sessionId), (s): Effect.Effect<EnhancedState, StoreError> => {
        const text = RUN_ID.test(runId) ? s.files.get(runPath(runId))?.text : undefined
        return text === undefined
          ? Effect.fail(new RunNotFound({ sessionId, runId }))
          : fromEither(decodeRun(text, `${sessionId}/${runPath(runId)}`))
      }),
    writeRun: (state) =>
      RUN_ID.test(state.runId)
        ? put(state.sessionId, runPath(state.runId), jsonText(state))
        : Effect.fail(new PathRefused({ path: state.runId.slice(0, 120), reason: "not a run id" })),
    listRuns: (sessionId) =>
      Effect.map(sessionOf(sessionId), (s) =>
        [...s.files.keys()]
          .filter((f) => f.startsWith(`${RUNS_DIR}/`) && f.endsWith(".json"))
          .map((f) => f.slice(RUNS_DIR.length + 1, -".json".length))
          .filter((id) => RUN_ID.test(id))
          .sort()
      ),
    readKnowledgeIndex: Effect.sync(() => knowledgeIndex),
    writeKnowledgeIndex: (text) =>
      Effect.sync(() => {
        knowledgeIndex = text
      }),
    listDistributions: Effect.sync(() => distributions),
    putDistribution: (distribution) =>
      Effect.sync(() => {
        distributions = withDistribution(distributions, distribution)
      }),
    cleanTemporaryFiles: Effect.succeed(0),
    flush: Effect.void
  }
  return service
}

export const layerMemory = (files: MemoryFiles = {}, root?: string): Layer.Layer<Store> =>
  Layer.sync(Store, () => makeMemory(files, root))
