/**
 * Sandboxed reads of a data root (seed 000's layout): global files (`profile.md`,
 * `system-prompt.md`) in the root, everything else of a session in `<root>/<sessionId>/`.
 * A path is checked as written (`References.sandboxPath`) and again after resolving symlinks: a
 * link that leads out of its directory is refused like `..` is.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Context, Effect, Either, Layer } from "effect"
import { UnresolvedReference } from "./CompilerErrors.ts"
import { sandboxPath } from "./References.ts"

export type Scope = "global" | "session"

export interface Service {
  readonly root: string
  /** The file's text, or undefined when it does not exist. */
  readonly read: (
    scope: Scope,
    sessionId: string,
    path: string
  ) => Effect.Effect<string | undefined, UnresolvedReference>
  /** Whether the session has a directory in the data root. */
  readonly hasSession: (sessionId: string) => Effect.Effect<boolean, UnresolvedReference>
  /** Files under a directory of the scope, relative to it, sorted (for globs). */
  readonly list: (
    scope: Scope,
    sessionId: string
  ) => Effect.Effect<ReadonlyArray<string>, UnresolvedReference>
}

export class Workspace extends Context.Tag("@ctxo/compiler/Workspace")<Workspace, Service>() {}

export const make = (root: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const base = (scope: Scope, sessionId: string) =>
      Effect.gen(function* () {
        if (scope === "global") return path.resolve(root)
        const id = yield* sandboxPath(sessionId, `session ${sessionId}`)
        if (id.includes("/")) {
          return yield* new UnresolvedReference({
            ref: `session ${sessionId}`,
            kind: "outside-sandbox",
            reason: "a session id is one path segment"
          })
        }
        return path.resolve(root, id)
      })
    const realInside = (dir: string, full: string, ref: string) =>
      Effect.gen(function* () {
        const realDir = yield* fs.realPath(dir).pipe(Effect.orElseSucceed(() => dir))
        const real = yield* fs.realPath(full).pipe(Effect.option)
        if (real._tag === "None") return undefined
        if (real.value !== realDir && !real.value.startsWith(`${realDir}${path.sep}`)) {
          return yield* new UnresolvedReference({
            ref,
            kind: "outside-sandbox",
            reason: "the path leads out of its directory through a symlink"
          })
        }
        return real.value
      })

    const service: Service = {
      root,
      hasSession: (sessionId) =>
        Effect.flatMap(base("session", sessionId), (dir) =>
          fs.stat(dir).pipe(
            Effect.map((info) => info.type === "Directory"),
            Effect.orElseSucceed(() => false)
          )
        ),
      read: (scope, sessionId, file) =>
        Effect.gen(function* () {
          const relative = yield* Either.match(sandboxPath(file), {
            onLeft: Effect.fail,
            onRight: Effect.succeed
          })
          const dir = yield* base(scope, sessionId)
          const real = yield* realInside(dir, path.join(dir, relative), file)
          if (real === undefined) return undefined
          const info = yield* fs.stat(real).pipe(Effect.option)
          if (info._tag === "None" || info.value.type !== "File") return undefined
          return yield* fs
            .readFileString(real)
            .pipe(
              Effect.mapError(
                (e) => new UnresolvedReference({ ref: file, kind: "missing-file", reason: e.message })
              )
            )
        }),
      list: (scope, sessionId) =>
        Effect.gen(function* () {
          const dir = yield* base(scope, sessionId)
          const entries = yield* fs
            .readDirectory(dir, { recursive: true })
            .pipe(Effect.orElseSucceed(() => []))
          const files: Array<string> = []
          for (const entry of entries) {
            const real = yield* realInside(dir, path.join(dir, entry), entry).pipe(
              Effect.orElseSucceed(() => undefined)
            )
            if (real === undefined) continue
            const info = yield* fs.stat(real).pipe(Effect.option)
            if (info._tag === "Some" && info.value.type === "File")
              files.push(entry.split(path.sep).join("/"))
          }
          return files.sort()
        })
    }
    return service
  })

export const layer = (root: string): Layer.Layer<Workspace, never, FileSystem.FileSystem | Path.Path> =>
  Layer.effect(Workspace, make(root))
