/**
 * What the compiler reads of a data root: global files (`profile.md`, `system-prompt.md`, any file
 * at the top of the root) and a session's files. The compiler never touches the file system: on
 * disk this is the data root's store (`@ctxo/store/Store`: one path rule, symlinks checked on the
 * opened file, a cache by device, inode, time and size); in memory (replay, stateless compiles)
 * the same path rules over a map of files. The store's refusals become `UnresolvedReference`s that
 * name the path as written.
 */
import { cleanGlobalPath, cleanPath, cleanSessionId } from "@ctxo/store/Paths"
import * as Store from "@ctxo/store/Store"
import type { PathRefused, StoreError } from "@ctxo/store/StoreErrors"
import { Context, Effect, Either, Layer } from "effect"
import { outsideSandbox, UnresolvedReference } from "./CompilerErrors.ts"

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
  /** Several files at once, in order. */
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

const unresolved = (ref: string) => (e: StoreError) =>
  e._tag === "PathRefused"
    ? outsideSandbox(ref, e)
    : new UnresolvedReference({ ref, kind: "missing-file", reason: e.message })

/** The compiler's reads through a data root's store. */
export const fromStore = (store: Store.Service): Service => ({
  root: store.root,
  hasSession: (sessionId) =>
    store.hasSession(sessionId).pipe(Effect.mapError(unresolved(`session ${sessionId}`))),
  read: (scope, sessionId, path) =>
    store.read(scope, sessionId, path).pipe(Effect.mapError(unresolved(path))),
  readMany: (scope, sessionId, paths) =>
    store.readMany(scope, sessionId, paths).pipe(Effect.mapError(unresolved(paths.join(", ")))),
  list: (scope, sessionId) =>
    store.list(scope, sessionId).pipe(Effect.mapError(unresolved(`session ${sessionId}`)))
})

/** A workspace over its own store of `root` (the CLI, tests). */
export const make = (root: string): Service => fromStore(Store.makeUnsafe(root))

export const layer = (root: string): Layer.Layer<Workspace> => Layer.sync(Workspace, () => make(root))

/** The compiler's reads through the data root's store in the context. */
export const layerStore: Layer.Layer<Workspace, never, Store.Store> = Layer.effect(
  Workspace,
  Effect.map(Store.Store, fromStore)
)

/** Files of a data root held in memory: global files, and each session's files by path. */
export interface MemoryFiles {
  readonly global: Readonly<Record<string, string>>
  readonly sessions: Readonly<Record<string, Readonly<Record<string, string>>>>
}

const refused = (ref: string) => (e: PathRefused) => outsideSandbox(ref, e)

/**
 * A data root in memory (the replay harness, stateless compiles): the store's path rules, with no
 * file system behind them.
 */
export const makeMemory = (files: MemoryFiles, root = "(memory)"): Service => {
  const sessionOf = (sessionId: string) =>
    Either.match(cleanSessionId(sessionId), {
      onLeft: (e) => Effect.fail(refused(`session ${sessionId}`)(e)),
      onRight: (id) => Effect.succeed(Object.hasOwn(files.sessions, id) ? files.sessions[id] : undefined)
    })
  const read = (scope: Scope, sessionId: string, file: string) =>
    Either.match(scope === "global" ? cleanGlobalPath(file) : cleanPath(file), {
      onLeft: (e) => Effect.fail(refused(file)(e)),
      onRight: (path) =>
        scope === "global"
          ? Effect.succeed(Object.hasOwn(files.global, path) ? files.global[path] : undefined)
          : Effect.map(sessionOf(sessionId), (dir) =>
              dir !== undefined && Object.hasOwn(dir, path) ? dir[path] : undefined
            )
    })
  return {
    root,
    hasSession: (sessionId) => Effect.map(sessionOf(sessionId), (dir) => dir !== undefined),
    read,
    readMany: (scope, sessionId, paths) => Effect.forEach(paths, (path) => read(scope, sessionId, path)),
    list: (scope, sessionId) =>
      scope === "global"
        ? Effect.succeed(Object.keys(files.global).sort())
        : Effect.map(sessionOf(sessionId), (dir) => Object.keys(dir ?? {}).sort())
  }
}

export const layerMemory = (files: MemoryFiles, root?: string): Layer.Layer<Workspace> =>
  Layer.succeed(Workspace, makeMemory(files, root))
