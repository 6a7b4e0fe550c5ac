/**
 * The store, history and compiler workspace of the request's tenant: each service here forwards to
 * the one rooted at the tenant's data directory (made on first use, then kept), so handlers and
 * the agent use `Store`, `HistoryStore` and `Workspace` as if there were one tenant.
 */
import * as Workspace from "@ctxo/compiler/Workspace"
import * as HistoryStore from "@ctxo/history/HistoryStore"
import * as Store from "@ctxo/store/Store"
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import { Context, Effect, FiberRef, Layer } from "effect"
import { CurrentTenant, Tenancy } from "./Tenancy.ts"

const perTenant = <S, R>(make: (root: string) => Effect.Effect<S, never, R>) =>
  Effect.gen(function* () {
    const tenancy = yield* Tenancy
    const context = yield* Effect.context<R>()
    const made = new Map<string, S>()
    return Effect.flatMap(FiberRef.get(CurrentTenant), (tenant) => {
      const known = made.get(tenant)
      if (known !== undefined) return Effect.succeed(known)
      return Effect.map(Effect.provide(make(tenancy.rootOf(tenant)), context), (service) => {
        made.set(tenant, service)
        return service
      })
    })
  })

export const layer: Layer.Layer<
  Store.Store | HistoryStore.HistoryStore | Workspace.Workspace,
  never,
  Tenancy | FileSystem.FileSystem | Path.Path
> = Layer.effectContext(
  Effect.gen(function* () {
    const tenancy = yield* Tenancy
    const store = yield* perTenant(Store.make)
    const history = yield* perTenant(HistoryStore.makeFile)
    const workspace = yield* perTenant((root) => Effect.succeed(Workspace.make(root)))
    const root = tenancy.rootOf("")
    const storeService: Store.Service = {
      root,
      listSessions: Effect.flatMap(store, (s) => s.listSessions),
      createSession: (input) => Effect.flatMap(store, (s) => s.createSession(input)),
      getSession: (id) => Effect.flatMap(store, (s) => s.getSession(id)),
      deleteSession: (id) => Effect.flatMap(store, (s) => s.deleteSession(id)),
      listFiles: (id) => Effect.flatMap(store, (s) => s.listFiles(id)),
      readFile: (id, path, range) => Effect.flatMap(store, (s) => s.readFile(id, path, range)),
      writeFile: (id, path, content, options) =>
        Effect.flatMap(store, (s) => s.writeFile(id, path, content, options)),
      deleteFile: (id, path, ifMatch) => Effect.flatMap(store, (s) => s.deleteFile(id, path, ifMatch)),
      withSessionLock: (id, effect) => Effect.flatMap(store, (s) => s.withSessionLock(id, effect))
    }
    const historyService: HistoryStore.Service = {
      load: (id) => Effect.flatMap(history, (h) => h.load(id)),
      modify: (id, f) => Effect.flatMap(history, (h) => h.modify(id, f)),
      saveFullResult: (id, callId, result) =>
        Effect.flatMap(history, (h) => h.saveFullResult(id, callId, result)),
      readFullResult: (id, callId) => Effect.flatMap(history, (h) => h.readFullResult(id, callId))
    }
    const workspaceService: Workspace.Service = {
      root,
      hasSession: (id) => Effect.flatMap(workspace, (w) => w.hasSession(id)),
      read: (scope, id, path) => Effect.flatMap(workspace, (w) => w.read(scope, id, path)),
      readMany: (scope, id, paths) => Effect.flatMap(workspace, (w) => w.readMany(scope, id, paths)),
      list: (scope, id) => Effect.flatMap(workspace, (w) => w.list(scope, id))
    }
    return Context.make(Store.Store, storeService).pipe(
      Context.add(HistoryStore.HistoryStore, historyService),
      Context.add(Workspace.Workspace, workspaceService)
    )
  })
)
