/**
 * The data root of seed 000 on disk:
 *
 *   <root>/profile.md, system-prompt.md      global files
 *   <root>/sessions.json                     thin records { id, concept, createdAt }
 *   <root>/<sessionId>/...                   context-config.json, session-prompt.md, messages.json, any file
 *
 * Every path is checked as written (relative, no `..`, no NUL, no drive or scheme) and again
 * after resolving symlinks (a link that leads out of the session is refused). Writes are atomic
 * (temp file, fsync, rename) and serialized per session; a write may carry the version it read
 * (`ifMatch`) and fails with VersionConflict when the file changed since. A version is the first
 * 16 hex digits of the SHA-256 of the content.
 */
import { createHash } from "node:crypto"
import type { Dirent } from "node:fs"
import { cp, lstat, mkdir, readdir, readFile, realpath, rm, stat, unlink } from "node:fs/promises"
import { dirname, join, relative, sep } from "node:path"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Context, Effect, Layer, Schema } from "effect"
import { writeFileAtomic } from "./Atomic.ts"
import {
  FileNotFound,
  InvalidRange,
  PathRefused,
  SessionExists,
  SessionNotFound,
  type StoreError,
  StoreIOError,
  VersionConflict
} from "./StoreErrors.ts"

export const SessionRecord = Schema.Struct({
  id: Schema.String,
  concept: Schema.String,
  createdAt: Schema.String
})
export type SessionRecord = typeof SessionRecord.Type

export const FileInfo = Schema.Struct({
  path: Schema.String,
  size: Schema.Number,
  version: Schema.String,
  modifiedAt: Schema.String
})
export type FileInfo = typeof FileInfo.Type

export const FileContent = Schema.Struct({
  path: Schema.String,
  content: Schema.String,
  version: Schema.String,
  startLine: Schema.Number,
  endLine: Schema.Number,
  totalLines: Schema.Number,
  modifiedAt: Schema.String
})
export type FileContent = typeof FileContent.Type

export const SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/
/** Files the history recorder owns: written through it, never through the files API. */
export const HISTORY_FILE = "messages.json"

export interface WriteOptions {
  /** The version the writer read: the write fails when the file changed since ("" = must not exist). */
  readonly ifMatch?: string
  /** Replace only lines startLine..endLine (1-based, inclusive) with the content. */
  readonly startLine?: number
  readonly endLine?: number
}

export interface Service {
  readonly root: string
  readonly listSessions: Effect.Effect<ReadonlyArray<SessionRecord>, StoreError>
  readonly createSession: (input: {
    readonly id?: string
    readonly concept: string
  }) => Effect.Effect<SessionRecord, StoreError>
  readonly getSession: (id: string) => Effect.Effect<SessionRecord, StoreError>
  readonly deleteSession: (id: string) => Effect.Effect<void, StoreError>
  readonly listFiles: (sessionId: string) => Effect.Effect<ReadonlyArray<FileInfo>, StoreError>
  /** A session's file (or a global file with `sessionId` undefined), optionally a line range. */
  readonly readFile: (
    sessionId: string | undefined,
    path: string,
    range?: { readonly startLine?: number; readonly endLine?: number }
  ) => Effect.Effect<FileContent, StoreError>
  readonly writeFile: (
    sessionId: string,
    path: string,
    content: string,
    options?: WriteOptions
  ) => Effect.Effect<FileInfo, StoreError>
  readonly deleteFile: (sessionId: string, path: string, ifMatch?: string) => Effect.Effect<void, StoreError>
  /** Runs `effect` holding the session's write lock (the history recorder and the files API share it). */
  readonly withSessionLock: <A, E, R>(
    sessionId: string,
    effect: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E, R>
}

export class Store extends Context.Tag("@ctxo/store/Store")<Store, Service>() {}

export const versionOf = (content: string): string =>
  createHash("sha256").update(content).digest("hex").slice(0, 16)

const splitLines = (text: string) => {
  const lines = text.split("\n")
  if (lines.length > 1 && lines.at(-1) === "") lines.pop()
  return lines
}

/** A path as written: relative, forward slashes, no `..`, NUL, drive letters or URL schemes. */
export const checkPath = (path: string): Effect.Effect<string, PathRefused> => {
  const refuse = (reason: string) => Effect.fail(new PathRefused({ path, reason }))
  if (path.length === 0) return refuse("empty path")
  if (path.includes("\u0000")) return refuse("contains a NUL byte")
  if (path.startsWith("/") || path.startsWith("\\") || /^[a-zA-Z]:/.test(path))
    return refuse("absolute paths are not allowed")
  if (/^[a-z][a-z0-9+.-]*:/i.test(path)) return refuse("URLs are not paths")
  if (path.includes("\\")) return refuse("use / to separate directories")
  const segments = path.split("/").filter((s) => s !== "" && s !== ".")
  if (segments.some((s) => s === "..")) return refuse("leaves the session directory")
  if (segments.length === 0) return refuse("names no file")
  return Effect.succeed(segments.join("/"))
}

const checkSessionId = (id: string) =>
  SESSION_ID.test(id)
    ? Effect.succeed(id)
    : Effect.fail(
        new PathRefused({
          path: id,
          reason: "a session id is letters, digits, '.', '_' or '-' (at most 128)"
        })
      )

const errno = (e: unknown) => (e as NodeJS.ErrnoException).code

export const make = (root: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const pathService = yield* Path.Path
    const io = (path: string, operation: string) => (e: unknown) =>
      new StoreIOError({ path, operation, reason: e instanceof Error ? e.message : String(e) })
    const attempt = <A>(path: string, operation: string, f: () => Promise<A>) =>
      Effect.tryPromise({ try: f, catch: io(path, operation) })
    const atomic = (file: string, text: string) =>
      writeFileAtomic(file, text).pipe(
        Effect.provideService(FileSystem.FileSystem, fs),
        Effect.provideService(Path.Path, pathService),
        Effect.mapError(io(file, "write"))
      )

    const locks = new Map<string, Effect.Semaphore>()
    const lockOf = (key: string) => {
      let lock = locks.get(key)
      if (lock === undefined) {
        lock = Effect.unsafeMakeSemaphore(1)
        locks.set(key, lock)
      }
      return lock
    }
    const withSessionLock = <A, E, R>(sessionId: string, effect: Effect.Effect<A, E, R>) =>
      lockOf(sessionId).withPermits(1)(effect)
    const indexLock = lockOf("\u0000sessions.json")

    const indexFile = join(root, "sessions.json")
    const readIndex = Effect.gen(function* () {
      const text = yield* attempt(indexFile, "read", () => readFile(indexFile, "utf8")).pipe(
        Effect.catchIf(
          (e) => e.reason.includes("ENOENT"),
          () => Effect.succeed("[]")
        )
      )
      return yield* Schema.decodeUnknown(Schema.parseJson(Schema.Array(SessionRecord)))(text).pipe(
        Effect.mapError((e) => new StoreIOError({ path: indexFile, operation: "parse", reason: e.message }))
      )
    })
    const writeIndex = (records: ReadonlyArray<SessionRecord>) =>
      atomic(indexFile, `${JSON.stringify(records, null, 2)}\n`)

    const sessionDir = (id: string) => Effect.map(checkSessionId(id), (ok) => join(root, ok))
    const getSession = (id: string) =>
      Effect.gen(function* () {
        yield* checkSessionId(id)
        const found = (yield* readIndex).find((r) => r.id === id)
        if (found === undefined) return yield* new SessionNotFound({ sessionId: id })
        return found
      })

    /** The file's absolute path, checked as written and after resolving symlinks. */
    const resolvePath = (sessionId: string | undefined, path: string) =>
      Effect.gen(function* () {
        const clean = yield* checkPath(path)
        const base = sessionId === undefined ? root : yield* sessionDir(sessionId)
        if (sessionId !== undefined) yield* getSession(sessionId)
        const full = join(base, clean)
        const realBase = yield* attempt(base, "resolve", () => realpath(base)).pipe(
          Effect.catchAll(() => Effect.succeed(base))
        )
        // The deepest existing ancestor (or the file) must resolve inside the base.
        let probe = full
        for (;;) {
          const real = yield* Effect.promise(() => realpath(probe).catch(() => undefined))
          if (real !== undefined) {
            if (real !== realBase && !real.startsWith(`${realBase}${sep}`))
              return yield* new PathRefused({ path, reason: "leads out of its directory through a symlink" })
            break
          }
          if (probe === base) break
          probe = dirname(probe)
        }
        return { clean, full }
      })

    const readText = (full: string, path: string) =>
      attempt(path, "read", () => readFile(full, "utf8")).pipe(
        Effect.catchIf(
          (e) => e.reason.includes("ENOENT") || e.reason.includes("EISDIR"),
          () => Effect.fail(new FileNotFound({ path }))
        )
      )
    const infoOf = (full: string, clean: string, content: string) =>
      Effect.map(
        attempt(clean, "stat", () => stat(full)),
        (s): FileInfo => ({
          path: clean,
          size: s.size,
          version: versionOf(content),
          modifiedAt: s.mtime.toISOString()
        })
      )

    const service: Service = {
      root,
      listSessions: readIndex,
      createSession: (input) =>
        indexLock.withPermits(1)(
          Effect.gen(function* () {
            const records = yield* readIndex
            const id = input.id ?? `s-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`
            yield* checkSessionId(id)
            if (records.some((r) => r.id === id)) return yield* new SessionExists({ sessionId: id })
            const record: SessionRecord = { id, concept: input.concept, createdAt: new Date().toISOString() }
            yield* attempt(id, "create", () => mkdir(join(root, id), { recursive: true }))
            yield* writeIndex([...records, record])
            return record
          })
        ),
      getSession,
      deleteSession: (id) =>
        indexLock.withPermits(1)(
          withSessionLock(
            id,
            Effect.gen(function* () {
              yield* getSession(id)
              const records = yield* readIndex
              // The index first: a crash after it leaves an orphan directory, never a dangling record.
              yield* writeIndex(records.filter((r) => r.id !== id))
              yield* attempt(id, "delete", () => rm(join(root, id), { recursive: true, force: true }))
            })
          )
        ),
      listFiles: (sessionId) =>
        Effect.gen(function* () {
          yield* getSession(sessionId)
          const dir = yield* sessionDir(sessionId)
          const entries: Array<Dirent> = yield* attempt(sessionId, "list", () =>
            readdir(dir, { recursive: true, withFileTypes: true })
          )
          const files: Array<FileInfo> = []
          for (const entry of entries) {
            if (!entry.isFile() || entry.name.startsWith(".") || entry.name.endsWith(".tmp")) continue
            const full = join(entry.parentPath, entry.name)
            const clean = relative(dir, full).split(sep).join("/")
            const content = yield* readText(full, clean)
            files.push(yield* infoOf(full, clean, content))
          }
          return files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
        }),
      readFile: (sessionId, path, range) =>
        Effect.gen(function* () {
          const { clean, full } = yield* resolvePath(sessionId, path)
          const content = yield* readText(full, clean)
          const modifiedAt = (yield* attempt(clean, "stat", () => stat(full))).mtime.toISOString()
          const lines = splitLines(content)
          const total = content === "" ? 0 : lines.length
          const start = range?.startLine ?? 1
          const end = Math.min(range?.endLine ?? total, total)
          if (range !== undefined && (range.startLine !== undefined || range.endLine !== undefined)) {
            if (
              start < 1 ||
              (range.endLine !== undefined && range.endLine < start) ||
              start > Math.max(total, 1)
            )
              return yield* new InvalidRange({
                path: clean,
                reason: `lines ${start}-${range.endLine ?? "end"} are outside 1-${total}`
              })
            return {
              path: clean,
              content: lines.slice(start - 1, end).join("\n"),
              version: versionOf(content),
              startLine: start,
              endLine: end,
              totalLines: total,
              modifiedAt
            }
          }
          return {
            path: clean,
            content,
            version: versionOf(content),
            startLine: 1,
            endLine: total,
            totalLines: total,
            modifiedAt
          }
        }),
      writeFile: (sessionId, path, content, options = {}) =>
        withSessionLock(
          sessionId,
          Effect.gen(function* () {
            const { clean, full } = yield* resolvePath(sessionId, path)
            if (clean === HISTORY_FILE)
              return yield* new PathRefused({
                path,
                reason: "messages.json is written by the history recorder (chat)"
              })
            const current = yield* readText(full, clean).pipe(
              Effect.catchTag("FileNotFound", () => Effect.succeed(undefined))
            )
            if (options.ifMatch !== undefined) {
              const actual = current === undefined ? null : versionOf(current)
              if ((options.ifMatch === "" ? null : options.ifMatch) !== actual)
                return yield* new VersionConflict({
                  path: clean,
                  expected: options.ifMatch || "(none)",
                  actual
                })
            }
            let next = content
            if (options.startLine !== undefined || options.endLine !== undefined) {
              const lines = current === undefined ? [] : splitLines(current)
              const start = options.startLine ?? 1
              const end = options.endLine ?? lines.length
              if (start < 1 || start > lines.length + 1 || end < start - 1 || end > lines.length)
                return yield* new InvalidRange({
                  path: clean,
                  reason: `lines ${start}-${end} are outside 1-${lines.length}`
                })
              const replaced = [...lines.slice(0, start - 1), ...splitLines(content), ...lines.slice(end)]
              next = `${replaced.join("\n")}\n`
            }
            yield* atomic(full, next)
            return yield* infoOf(full, clean, next)
          })
        ),
      deleteFile: (sessionId, path, ifMatch) =>
        withSessionLock(
          sessionId,
          Effect.gen(function* () {
            const { clean, full } = yield* resolvePath(sessionId, path)
            const current = yield* readText(full, clean)
            if (ifMatch !== undefined && ifMatch !== versionOf(current))
              return yield* new VersionConflict({
                path: clean,
                expected: ifMatch,
                actual: versionOf(current)
              })
            const info = yield* attempt(clean, "stat", () => lstat(full))
            if (info.isDirectory()) return yield* new FileNotFound({ path: clean })
            yield* attempt(clean, "delete", () => unlink(full))
          })
        ),
      withSessionLock
    }
    return service
  })

export const layer = (root: string): Layer.Layer<Store, never, FileSystem.FileSystem | Path.Path> =>
  Layer.effect(Store, make(root))

/**
 * Copies `from` (an example data root) into `root` when `root` has no sessions.json yet: the
 * embedded default a fresh clone starts with. Returns whether it seeded.
 */
export const seedIfEmpty = (root: string, from: string) =>
  Effect.tryPromise({
    try: async () => {
      const exists = await stat(join(root, "sessions.json")).then(
        () => true,
        (e) => (errno(e) === "ENOENT" ? false : Promise.reject(e))
      )
      if (exists) return false
      await mkdir(root, { recursive: true })
      await cp(from, root, { recursive: true, errorOnExist: false, force: false })
      return true
    },
    catch: (e) =>
      new StoreIOError({ path: root, operation: "seed", reason: e instanceof Error ? e.message : String(e) })
  })
