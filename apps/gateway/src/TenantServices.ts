/**
 * The store, history and compiler workspace of the request's tenant: each service here forwards to
 * the tenant's store (made on first use, then kept) and the history and workspace over it, so
 * handlers and the agent use `Store`, `HistoryStore` and `Workspace` as if there were one tenant,
 * and a tenant's files, history and turns share one lock per session and one cache. When the layer
 * is released, every tenant store folds its history journals into messages.json. The stores are
 * the `StoreBackend`'s (PostgreSQL with CTXO_DATABASE_URL), else the file store's.
 */
import * as Workspace from "@ctxo/compiler/Workspace"
import * as HistoryStore from "@ctxo/history/HistoryStore"
import * as SessionCache from "@ctxo/store/SessionCache"
import * as Store from "@ctxo/store/Store"
import { Context, Effect, FiberRef, Layer, Option } from "effect"
import * as StoreBackend from "./StoreBackend.ts"
import { CurrentTenant, Tenancy } from "./Tenancy.ts"

/** How long a release waits for the stores to fold their journals (what is not folded is read as the journal). */
const FLUSH_TIMEOUT = "5 seconds"

/**
 * One store per tenant root (made on first use, then kept): its lock and cache are the tenant's.
 * Each is flushed (its journals folded) when the scope closes.
 */
const perTenantStore = Effect.gen(function* () {
  const tenancy = yield* Tenancy
  const backend = Option.getOrElse(yield* Effect.serviceOption(StoreBackend.StoreBackend), () =>
    StoreBackend.files(tenancy.rootOf(""))
  )
  const cache = Option.getOrElse(yield* Effect.serviceOption(SessionCache.SessionCache), () =>
    SessionCache.make()
  )
  const made = new Map<
    string,
    { store: Store.Service; history: HistoryStore.Service; workspace: Workspace.Service }
  >()
  yield* Effect.addFinalizer(() =>
    Effect.forEach(made.values(), (s) => s.store.flush, { discard: true, concurrency: "unbounded" }).pipe(
      // Interruptible inside the release, so the timeout can end it.
      Effect.interruptible,
      Effect.timeout(FLUSH_TIMEOUT),
      Effect.ignore
    )
  )
  const current = Effect.map(FiberRef.get(CurrentTenant), (tenant) => {
    let services = made.get(tenant)
    if (services === undefined) {
      const store = backend.storeOf(tenant, tenancy.rootOf(tenant), cache)
      services = { store, history: HistoryStore.fromStore(store), workspace: Workspace.fromStore(store) }
      made.set(tenant, services)
    }
    return services
  })
  return { current, cache }
})

export const layer: Layer.Layer<
  Store.Store | HistoryStore.HistoryStore | Workspace.Workspace,
  never,
  Tenancy
> = Layer.scopedContext(
  Effect.gen(function* () {
    const tenancy = yield* Tenancy
    const { current, cache } = yield* perTenantStore
    const store = Effect.map(current, (s) => s.store)
    const history = Effect.map(current, (s) => s.history)
    const workspace = Effect.map(current, (s) => s.workspace)
    const root = tenancy.rootOf("")
    const storeService: Store.Service = {
      root,
      scope: Effect.map(store, (s) => s.root),
      cache,
      listSessions: Effect.flatMap(store, (s) => s.listSessions),
      createSession: (input) => Effect.flatMap(store, (s) => s.createSession(input)),
      getSession: (id) => Effect.flatMap(store, (s) => s.getSession(id)),
      updateSession: (id, patch) => Effect.flatMap(store, (s) => s.updateSession(id, patch)),
      deleteSession: (id) => Effect.flatMap(store, (s) => s.deleteSession(id)),
      listFiles: (id) => Effect.flatMap(store, (s) => s.listFiles(id)),
      readFile: (id, path, range) => Effect.flatMap(store, (s) => s.readFile(id, path, range)),
      writeFile: (id, path, content, options) =>
        Effect.flatMap(store, (s) => s.writeFile(id, path, content, options)),
      deleteFile: (id, path, ifMatch) => Effect.flatMap(store, (s) => s.deleteFile(id, path, ifMatch)),
      withSessionLock: (id, effect) => Effect.flatMap(store, (s) => s.withSessionLock(id, effect)),
      hasSession: (id) => Effect.flatMap(store, (s) => s.hasSession(id)),
      read: (scope, id, path) => Effect.flatMap(store, (s) => s.read(scope, id, path)),
      readMany: (scope, id, paths) => Effect.flatMap(store, (s) => s.readMany(scope, id, paths)),
      list: (scope, id) => Effect.flatMap(store, (s) => s.list(scope, id)),
      readHistory: (id) => Effect.flatMap(store, (s) => s.readHistory(id)),
      writeHistory: (id, text) => Effect.flatMap(store, (s) => s.writeHistory(id, text)),
      readHistoryJson: (id) => Effect.flatMap(store, (s) => s.readHistoryJson(id)),
      updateHistory: (id, f) => Effect.flatMap(store, (s) => s.updateHistory(id, f)),
      writeToolResult: (id, callId, text) =>
        Effect.flatMap(store, (s) => s.writeToolResult(id, callId, text)),
      readToolResult: (id, callId) => Effect.flatMap(store, (s) => s.readToolResult(id, callId)),
      readTasks: (id) => Effect.flatMap(store, (s) => s.readTasks(id)),
      writeTasks: (id, tasks) => Effect.flatMap(store, (s) => s.writeTasks(id, tasks)),
      readMemory: (id) => Effect.flatMap(store, (s) => s.readMemory(id)),
      updateMemory: (id, update) => Effect.flatMap(store, (s) => s.updateMemory(id, update)),
      readGlobalMemory: Effect.flatMap(store, (s) => s.readGlobalMemory),
      updateGlobalMemory: (update) => Effect.flatMap(store, (s) => s.updateGlobalMemory(update)),
      readKnowledgeIndex: Effect.flatMap(store, (s) => s.readKnowledgeIndex),
      writeKnowledgeIndex: (text) => Effect.flatMap(store, (s) => s.writeKnowledgeIndex(text)),
      readRun: (id, runId) => Effect.flatMap(store, (s) => s.readRun(id, runId)),
      writeRun: (state) => Effect.flatMap(store, (s) => s.writeRun(state)),
      listRuns: (id) => Effect.flatMap(store, (s) => s.listRuns(id)),
      listDistributions: Effect.flatMap(store, (s) => s.listDistributions),
      putDistribution: (distribution) => Effect.flatMap(store, (s) => s.putDistribution(distribution)),
      cleanTemporaryFiles: Effect.flatMap(store, (s) => s.cleanTemporaryFiles),
      flush: Effect.flatMap(store, (s) => s.flush)
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
