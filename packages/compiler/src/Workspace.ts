/**
 * Sandboxed reads of a data root (seed 000's layout): global files (`profile.md`,
 * `system-prompt.md`) in the root, everything else of a session in `<root>/<sessionId>/`.
 * A path is checked as written (`References.sandboxPath`) and again after resolving symlinks: a
 * link that leads out of its directory is refused like `..` is.
 *
 * The data root is a local directory, read with Node's native `fs.promises` (its `realpath` is
 * the system call, not a walk). File contents are cached by device, inode, modification time and
 * size: a warm compile of an unchanged session reads no file twice. A cached file is checked with
 * one synchronous `stat` (a few microseconds on a local disk, where a thread-pool round trip costs
 * tens): the same inode is the same file, already proven to be inside; anything else (a new file,
 * a link swapped in, a change) takes the full path again.
 */

import type { Stats } from "node:fs"
import { statSync } from "node:fs"
import { readdir, readFile, realpath, stat } from "node:fs/promises"
import { join, relative, resolve, sep } from "node:path"
import { Context, Effect, Either, Layer } from "effect"
import { UnresolvedReference } from "./CompilerErrors.ts"
import { sandboxPath } from "./References.ts"

export type Scope = "global" | "session"

export interface Service {
  readonly root: string
  /** Whether the session has a directory in the data root. */
  readonly hasSession: (sessionId: string) => Effect.Effect<boolean, UnresolvedReference>
  /** The file's text, or undefined when it does not exist. */
  readonly read: (
    scope: Scope,
    sessionId: string,
    path: string
  ) => Effect.Effect<string | undefined, UnresolvedReference>
  /**
   * Several files at once, in order: those unchanged since their last read at once, the rest
   * read concurrently.
   */
  readonly readMany: (
    scope: Scope,
    sessionId: string,
    paths: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<string | undefined>, UnresolvedReference>
  /** Files of the scope's directory, recursively, relative to it, sorted (for globs and CODE_LAW.md). */
  readonly list: (
    scope: Scope,
    sessionId: string
  ) => Effect.Effect<ReadonlyArray<string>, UnresolvedReference>
}

export class Workspace extends Context.Tag("@ctxo/compiler/Workspace")<Workspace, Service>() {}

const attempt = <A>(f: () => Promise<A>) =>
  Effect.tryPromise({ try: f, catch: (e) => e as NodeJS.ErrnoException }).pipe(
    Effect.map((value) => value as A | undefined),
    Effect.catchAll((e) =>
      e.code === "ENOENT" || e.code === "ENOTDIR" ? Effect.succeed(undefined) : Effect.fail(e)
    )
  )

/** A session id as one checked path segment (the disk and memory workspaces share the rule). */
const sessionSegment = (sessionId: string) =>
  Effect.flatMap(
    Either.match(sandboxPath(sessionId, `session ${sessionId}`), {
      onLeft: Effect.fail,
      onRight: Effect.succeed
    }),
    (id) =>
      id.includes("/")
        ? Effect.fail(
            new UnresolvedReference({
              ref: `session ${sessionId}`,
              kind: "outside-sandbox",
              reason: "a session id is one path segment"
            })
          )
        : Effect.succeed(id)
  )

export const make = (root: string): Service => {
  const absoluteRoot = resolve(root)
  const contents = new Map<string, { readonly stamp: string; readonly text: string }>()
  // The last good read of each request (scope, session, path as written): the file and its text.
  const known = new Map<string, { readonly full: string; readonly stamp: string; readonly text: string }>()
  const listings = new Map<
    string,
    { readonly dirs: ReadonlyArray<readonly [string, string]>; readonly files: ReadonlyArray<string> }
  >()
  const stampOf = (info: Stats) => `${info.dev}:${info.ino}:${info.mtimeMs}:${info.size}`
  const realBases = new Map<string, string>()
  const io = (ref: string) => (e: NodeJS.ErrnoException) =>
    new UnresolvedReference({ ref, kind: "missing-file", reason: e.message })

  const base = (scope: Scope, sessionId: string) =>
    scope === "global"
      ? Effect.succeed(absoluteRoot)
      : Effect.map(sessionSegment(sessionId), (id) => join(absoluteRoot, id))
  const realBase = (dir: string) =>
    Effect.gen(function* () {
      const cached = realBases.get(dir)
      if (cached !== undefined) return cached
      const real = (yield* attempt(() => realpath(dir)).pipe(Effect.mapError(io(dir)))) ?? dir
      realBases.set(dir, real)
      return real
    })
  /** The real path of `full` when it exists and stays inside `dir`; a link out is an error. */
  const realInside = (dir: string, full: string, ref: string) =>
    Effect.gen(function* () {
      const inside = yield* realBase(dir)
      const real = yield* attempt(() => realpath(full)).pipe(Effect.mapError(io(ref)))
      if (real === undefined) return undefined
      if (real !== inside && !real.startsWith(`${inside}${sep}`)) {
        return yield* new UnresolvedReference({
          ref,
          kind: "outside-sandbox",
          reason: "the path leads out of its directory through a symlink"
        })
      }
      return real
    })
  const fileStat = (real: string, ref: string) =>
    attempt<Stats>(() => stat(real)).pipe(Effect.mapError(io(ref)))

  // The text of an earlier good read of the same request (scope, session, path as written) when the
  // file is unchanged: the checks on the path are pure, so only the file's stamp needs looking at.
  const unchanged = (scope: Scope, sessionId: string, file: string): string | undefined => {
    const request = `${scope}\u0000${sessionId}\u0000${file}`
    const seen = known.get(request)
    if (seen === undefined) return undefined
    const info = statSync(seen.full, { throwIfNoEntry: false })
    if (info?.isFile() && stampOf(info) === seen.stamp) return seen.text
    known.delete(request)
    return undefined
  }
  const read = (scope: Scope, sessionId: string, file: string) =>
    Effect.suspend(() => {
      const text = unchanged(scope, sessionId, file)
      if (text !== undefined) return Effect.succeed<string | undefined>(text)
      return Effect.gen(function* () {
        const path = yield* Either.match(sandboxPath(file), { onLeft: Effect.fail, onRight: Effect.succeed })
        const dir = yield* base(scope, sessionId)
        const full = join(dir, path)
        const real = yield* realInside(dir, full, file)
        if (real === undefined) return undefined
        const info = yield* fileStat(real, file)
        if (info === undefined || !info.isFile()) return undefined
        const stamp = stampOf(info)
        let entry = contents.get(real)
        if (entry === undefined || entry.stamp !== stamp) {
          const text = yield* attempt(() => readFile(real, "utf8")).pipe(Effect.mapError(io(file)))
          if (text === undefined) return undefined
          entry = { stamp, text }
          contents.set(real, entry)
        }
        known.set(`${scope}\u0000${sessionId}\u0000${file}`, { full, ...entry })
        return entry.text
      })
    })

  return {
    root,
    hasSession: (sessionId) =>
      Effect.map(
        base("session", sessionId),
        (dir) => statSync(dir, { throwIfNoEntry: false })?.isDirectory() === true
      ),
    read,
    readMany: (scope, sessionId, paths) =>
      Effect.suspend(() => {
        const texts = paths.map((path) => unchanged(scope, sessionId, path))
        const missing = paths.flatMap((_, i) => (texts[i] === undefined ? [i] : []))
        if (missing.length === 0) return Effect.succeed(texts)
        return Effect.forEach(missing, (i) => read(scope, sessionId, paths[i]!), { concurrency: 16 }).pipe(
          Effect.map((read) => {
            for (const [k, i] of missing.entries()) texts[i] = read[k]
            return texts
          })
        )
      }),
    list: (scope, sessionId) =>
      Effect.gen(function* () {
        const dir = yield* base(scope, sessionId)
        // A listing stands while no directory of it changed (adding, removing or renaming an entry
        // changes its directory's modification time).
        const listed = listings.get(dir)
        if (
          listed?.dirs.every(([path, stamp]) => {
            const info = statSync(path, { throwIfNoEntry: false })
            return info !== undefined && stampOf(info) === stamp
          })
        )
          return listed.files
        const dirs: Array<readonly [string, string]> = []
        const dirInfo = statSync(dir, { throwIfNoEntry: false })
        if (dirInfo !== undefined) dirs.push([dir, stampOf(dirInfo)])
        const inside = yield* realBase(dir)
        const entries =
          (yield* attempt(() => readdir(dir, { recursive: true, withFileTypes: true })).pipe(
            Effect.mapError(io(dir))
          )) ?? []
        const files: Array<string> = []
        for (const entry of entries) {
          const full = join(entry.parentPath, entry.name)
          if (entry.isDirectory()) {
            const info = statSync(full, { throwIfNoEntry: false })
            if (info !== undefined) dirs.push([full, stampOf(info)])
          } else if (entry.isFile()) {
            // A regular file under a real directory of the session is inside it.
            const real = yield* realBase(entry.parentPath)
            if (real === inside || real.startsWith(`${inside}${sep}`))
              files.push(relative(dir, full).split(sep).join("/"))
          } else if (entry.isSymbolicLink()) {
            const real = yield* realInside(dir, full, entry.name).pipe(Effect.orElseSucceed(() => undefined))
            if (
              real !== undefined &&
              (yield* fileStat(real, entry.name).pipe(Effect.orElseSucceed(() => undefined)))?.isFile()
            ) {
              files.push(relative(dir, full).split(sep).join("/"))
            }
          }
        }
        files.sort()
        listings.set(dir, { dirs, files })
        return files
      })
  }
}

export const layer = (root: string): Layer.Layer<Workspace> => Layer.sync(Workspace, () => make(root))

/** Files of a data root held in memory: global files, and each session's files by path. */
export interface MemoryFiles {
  readonly global: Readonly<Record<string, string>>
  readonly sessions: Readonly<Record<string, Readonly<Record<string, string>>>>
}

/**
 * A data root in memory (the replay harness, stateless compiles): the same path checks as on disk,
 * with no file system behind them.
 */
export const makeMemory = (files: MemoryFiles, root = "(memory)"): Service => {
  const sessionOf = (sessionId: string) =>
    Effect.map(sessionSegment(sessionId), (id) =>
      Object.hasOwn(files.sessions, id) ? files.sessions[id] : undefined
    )
  const scopeFiles = (scope: Scope, sessionId: string) =>
    scope === "global" ? Effect.succeed<Readonly<Record<string, string>>>(files.global) : sessionOf(sessionId)
  const read = (scope: Scope, sessionId: string, file: string) =>
    Effect.flatMap(
      Either.match(sandboxPath(file), { onLeft: Effect.fail, onRight: Effect.succeed }),
      (path) =>
        Effect.map(scopeFiles(scope, sessionId), (dir) =>
          dir !== undefined && Object.hasOwn(dir, path) ? dir[path] : undefined
        )
    )
  return {
    root,
    hasSession: (sessionId) => Effect.map(sessionOf(sessionId), (dir) => dir !== undefined),
    read,
    readMany: (scope, sessionId, paths) => Effect.forEach(paths, (path) => read(scope, sessionId, path)),
    list: (scope, sessionId) =>
      Effect.map(scopeFiles(scope, sessionId), (dir) => Object.keys(dir ?? {}).sort())
  }
}

export const layerMemory = (files: MemoryFiles, root?: string): Layer.Layer<Workspace> =>
  Layer.succeed(Workspace, makeMemory(files, root))
