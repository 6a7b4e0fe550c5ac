/**
 * Plays a scenario (`ctxo.scenario/v1`) through the real services, as the gateway wires them, over
 * a file store in a temporary data directory, and records what the invariants of
 * `ScenarioInvariants` judge. Nothing here judges.
 *
 * Per tenant, a data root of its own (`<dir>/tenants/<tenant>`, as the gateway lays tenants out)
 * with its own services: the file store, history and workspace over it, the turn engine (the
 * given compiler and compactor, the deterministic summarizer, the agent's tools offered on
 * demand), memory levels, the session controller and its event bus, and the bus's memory
 * subscriber (an ended session's L2 is aggregated into L3 and persisted to L4). The model registry
 * and tokenizer are the caller's. A `chat` step is a turn of the turn engine with the scenario's
 * replies as the model and the tools; `aggregate` is `@ctxo/agent/Aggregate`; lifecycle, tasks and
 * distribution go through the controller; memory steps through `@ctxo/agent/Memory`. A `restart`
 * closes every service (the bus and its subscriber with them) and starts new ones on the same
 * directory, `advanceMs` later on the memory's clock.
 *
 * Measured along the way: every compile's budget ledger (through the compiler seam, so a
 * session's build inside an aggregate counts too), every aggregate's blocks, the text the agent
 * reads and the state and inputs of every session at that moment, each turn's importance and its
 * session's L2 file after it, L4 when a session ends (once the bus has persisted it, or after
 * `settleMs`) and around each restart, tasks around each distribution, every step's outcome.
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve, sep } from "node:path"
import { aggregate } from "@ctxo/agent/Aggregate"
import * as Controller from "@ctxo/agent/Controller"
import * as Memory from "@ctxo/agent/Memory"
import * as Orchestrator from "@ctxo/agent/Orchestrator"
import * as SessionEvents from "@ctxo/agent/SessionEvents"
import { agentTools } from "@ctxo/agent/Tools"
import * as TurnEngine from "@ctxo/agent/TurnEngine"
import { ContextCompiler, HistoryCompactor, seamsLive } from "@ctxo/agent/TurnEngine"
import { ModelRegistry } from "@ctxo/budget/ModelRegistry"
import { Tokenizer } from "@ctxo/budget/Tokenizer"
import type { CompileResult } from "@ctxo/compiler/Compile"
import * as CompileCache from "@ctxo/compiler/CompileCache"
import type { MemoryItem } from "@ctxo/compiler/ContextSource"
import * as Workspace from "@ctxo/compiler/Workspace"
import { decodeHistoryText } from "@ctxo/history/HistoryFormat"
import * as HistoryStore from "@ctxo/history/HistoryStore"
import { textOf } from "@ctxo/history/Message"
import * as Summarizer from "@ctxo/history/Summarizer"
import type { RawToolResult } from "@ctxo/history/ToolResultCompressor"
import { turnsOf } from "@ctxo/history/Turns"
import type { MemoryEntry } from "@ctxo/store/Records"
import * as Store from "@ctxo/store/Store"
import { Clock, Context, Effect, Either, Exit, Layer, Schema, Scope } from "effect"
import type { Profile } from "./Replay.ts"
import { modelStepAt, type Planned, planSteps } from "./Replay.ts"
import type { ChatStep, Data, MemoryStep, NewSession, RunStep, Scenario, ScenarioStep } from "./Scenario.ts"
import { DEFAULT_TENANT } from "./Scenario.ts"
import type {
  AggregateEvidence,
  BudgetEvidence,
  DistributionEvidence,
  EndEvidence,
  MemoryEntryEvidence,
  MemoryShown,
  RestartEvidence,
  RunEvidence,
  ScenarioEvidence,
  SessionState,
  StepEvidence,
  TasksOf,
  TurnEvidence
} from "./ScenarioInvariants.ts"
import { recountAggregate, sectionsOf } from "./ScenarioInvariants.ts"

export interface ScenarioOptions {
  /** Where `data.from` folders are found (the repository's root). */
  readonly root: string
  /** The turn engine's compiler and compactor (default: the live ones; the gate's breakers swap them). */
  readonly seams?: Layer.Layer<ContextCompiler | HistoryCompactor>
  /** How long to wait for the event bus to persist an ended session's memory (default 5,000 ms). */
  readonly settleMs?: number
  /** Keep the data directory (for a person to look at); its path is the evidence's `dataDir`. */
  readonly keep?: boolean
}

/** A step the scenario asks for cannot be taken as written (an entry it names is not there). */
export class ScenarioStepError extends Schema.TaggedError<ScenarioStepError>(
  "@ctxo/replay/ScenarioStepError"
)("ScenarioStepError", { reason: Schema.String }) {
  override get message() {
    return this.reason
  }
}

/** The sessions a tenant's starting data already has (its `sessions.json`), for `parseScenario`. */
export const existingSessions =
  (scenario: Pick<Scenario, "data" | "tenants">, root: string) =>
  (tenant: string): ReadonlyArray<string> => {
    const data = tenant === DEFAULT_TENANT ? scenario.data : scenario.tenants?.[tenant]
    if (data?.from === undefined) return []
    try {
      const index = JSON.parse(
        readFileSync(join(resolve(root, data.from), "sessions.json"), "utf8")
      ) as Array<{
        id: string
      }>
      return index.map((s) => s.id)
    } catch {
      return []
    }
  }

type TenantServices =
  | Store.Store
  | HistoryStore.HistoryStore
  | Workspace.Workspace
  | Memory.Memory
  | Controller.Controller
  | TurnEngine.TurnEngine
  | SessionEvents.SessionEvents
  | ModelRegistry
  | Tokenizer
  | CompileCache.CompileCache

/** A clock `offset` milliseconds ahead of the real one (time that passed during restarts). */
const clockAt = (offset: number): Clock.Clock => {
  const real = Clock.make()
  const millis = () => real.unsafeCurrentTimeMillis() + offset
  const nanos = () => real.unsafeCurrentTimeNanos() + BigInt(offset) * 1_000_000n
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: millis,
    currentTimeMillis: Effect.sync(millis),
    unsafeCurrentTimeNanos: nanos,
    currentTimeNanos: Effect.sync(nanos),
    sleep: (duration) => real.sleep(duration)
  }
}

const tenantsOf = (scenario: Scenario): ReadonlyArray<string> => {
  const set = new Set<string>([DEFAULT_TENANT, ...Object.keys(scenario.tenants ?? {})])
  for (const s of scenario.sessions) set.add(s.tenant ?? DEFAULT_TENANT)
  for (const s of scenario.steps) if ("tenant" in s && s.tenant !== undefined) set.add(s.tenant)
  return [...set]
}

const inside = (base: string, path: string) => {
  const full = resolve(base, path)
  if (full !== base && !full.startsWith(base + sep))
    throw new ScenarioStepError({ reason: `${path}: a file of the data root must stay inside it` })
  return full
}

/** A tenant's data root as the scenario starts it: a copy of `from`, then `files` written over it. */
const seed = (dir: string, data: Data | undefined, root: string) => {
  mkdirSync(dir, { recursive: true })
  if (data?.from !== undefined) {
    const from = resolve(root, data.from)
    if (!existsSync(from)) throw new ScenarioStepError({ reason: `data.from: no folder ${data.from}` })
    cpSync(from, dir, { recursive: true })
  }
  for (const [path, text] of Object.entries(data?.files ?? {})) {
    const full = inside(dir, path)
    mkdirSync(dirname(full), { recursive: true })
    writeFileSync(full, text)
  }
}

const errorOf = (e: unknown): { readonly tag: string; readonly message: string } => {
  if (typeof e === "object" && e !== null) {
    const tag = (e as { _tag?: unknown })._tag
    const message = (e as { message?: unknown }).message
    return {
      tag: typeof tag === "string" ? tag : "Error",
      message: typeof message === "string" ? message : String(e)
    }
  }
  return { tag: "Error", message: String(e) }
}

const entryEvidence = (e: MemoryEntry): MemoryEntryEvidence => ({
  id: e.id,
  level: e.level,
  text: e.text,
  importance: e.importance,
  reasons: e.reasons,
  sources: e.sources.map((s) => ({ session: s.session, ...(s.turn === undefined ? {} : { turn: s.turn }) })),
  ...(e.pinned === true ? { pinned: true } : {}),
  ...(e.deletedAt === undefined ? {} : { deletedAt: e.deletedAt })
})

/** The text of a rendered request, message by message (what the agent reads). */
const textsOf = (request: unknown): ReadonlyArray<string> => {
  const r = request as {
    messages?: ReadonlyArray<{ content?: unknown }>
    system?: string
    prompt?: string
  }
  if (typeof r.prompt === "string") return [r.prompt]
  const out: Array<string> = typeof r.system === "string" && r.system !== "" ? [r.system] : []
  for (const m of r.messages ?? []) {
    if (typeof m.content === "string") out.push(m.content)
    else if (Array.isArray(m.content))
      out.push(
        m.content
          .flatMap((b: { type?: string; text?: string }) => (b.type === "text" && b.text ? [b.text] : []))
          .join("\n")
      )
  }
  return out
}

/** The scenario's replies as the model and the tools of one turn (as the replay harness drives them). */
const scriptedDriver = (plan: ReadonlyArray<Planned>): TurnEngine.Driver => {
  let next = 0
  return {
    model: () =>
      Effect.sync(() => {
        while (plan[next]?.kind === "result") next++
        const first = plan[next]
        if (first === undefined || first.kind === "final") {
          next++
          return { text: first?.text ?? "", toolCalls: [] }
        }
        const taken = modelStepAt(plan, next)
        next = taken.next
        return { text: taken.text, toolCalls: taken.toolCalls }
      }),
    runTool: (call) =>
      Effect.sync(
        () =>
          (plan.find((p) => p.kind === "result" && p.result!.callId === call.id)?.result?.result ?? {
            status: "error",
            error: { message: "the scenario scripts no result for this call" }
          }) as RawToolResult
      )
  }
}

/** A compile's (or an aggregate's) budget ledger as the shares invariant reads it, units added up again. */
export const observeLedger = (
  report: CompileResult["report"]
): Pick<BudgetEvidence, "available" | "total" | "restored" | "sources"> => {
  const units = report.units
  const restoredIds = new Set(report.repairs.filter((r) => r.action === "restored").map((r) => r.unit))
  return {
    available: report.available,
    ...(report.total === undefined ? {} : { total: report.total }),
    restored: units.filter((u) => restoredIds.has(u.id)).reduce((n, u) => n + u.tokens, 0),
    sources: report.sources.map((s) => ({
      id: s.id,
      required: s.required,
      share: s.share,
      cap: s.cap,
      ask: s.ask,
      grant: s.grant,
      used: s.used,
      surplusReceived: s.surplusReceived,
      includedTokens: units
        .filter((u) => u.source === s.id && u.status === "included")
        .reduce((n, u) => n + u.tokens, 0)
    }))
  }
}

/** The memories a compile was offered: whether each was kept, and whether its text is in the request. */
export const observeMemory = (
  result: CompileResult,
  offered: ReadonlyArray<MemoryItem> | undefined
): ReadonlyArray<MemoryShown> => {
  const serialized = JSON.stringify(result.request)
  const included = new Set(result.report.units.filter((u) => u.status === "included").map((u) => u.id))
  return (offered ?? []).map((m) => ({
    id: m.id,
    level: m.level,
    text: m.text,
    included: included.has(m.id),
    inRequest: serialized.includes(JSON.stringify(m.text).slice(1, -1))
  }))
}

interface Process {
  readonly scope: Scope.CloseableScope
  readonly tenants: ReadonlyMap<string, Context.Context<TenantServices>>
}

/** Plays one scenario for one profile; its evidence (a failure to play is evidence too). */
export const runScenario = (scenario: Scenario, profile: Profile, options: ScenarioOptions) =>
  Effect.gen(function* () {
    const registry = yield* ModelRegistry
    const tokenizer = yield* Tokenizer
    const seams = yield* Layer.build(options.seams ?? seamsLive)
    const compiler = Context.get(seams, ContextCompiler)
    const compactor = Context.get(seams, HistoryCompactor)
    const settleMs = options.settleMs ?? 5_000
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "ctxo-scenario-"))),
      (d) =>
        Effect.sync(() => (options.keep === true ? undefined : rmSync(d, { recursive: true, force: true })))
    )
    const rootOf = (tenant: string) => join(dir, "tenants", tenant)
    const tenants = tenantsOf(scenario)

    const steps: Array<StepEvidence> = []
    const budgets: Array<BudgetEvidence> = []
    const aggregates: Array<AggregateEvidence> = []
    const turns: Array<TurnEvidence> = []
    const ends: Array<EndEvidence> = []
    const restarts: Array<RestartEvidence> = []
    const distributions: Array<DistributionEvidence> = []
    const runs: Array<RunEvidence> = []
    const taskIds = new Map<string, string>()
    const keysUsed = new Set<string>()
    let current = -1
    let restartCount = 0
    let offset = 0

    const configuredShares = (tenant: string, session: string) => {
      try {
        const manifest = JSON.parse(
          readFileSync(join(rootOf(tenant), session, Store.MANIFEST_FILE), "utf8")
        ) as {
          budget?: { shares?: Record<string, number> }
        }
        return manifest.budget?.shares
      } catch {
        return undefined
      }
    }

    /** The compiler seam, measuring every compile of a tenant's services. */
    const spyOn = (tenant: string): TurnEngine.CompilerService => ({
      compile: (o) =>
        Effect.tap(compiler.compile(o), (result) =>
          Effect.sync(() => {
            const shares = configuredShares(tenant, o.sessionId)
            budgets.push({
              step: current,
              what: "compile",
              tenant,
              session: o.sessionId,
              model: profile.id,
              ...observeLedger(result.report),
              ...(shares === undefined ? {} : { configuredShares: shares }),
              ...(o.memory === undefined ? {} : { memory: observeMemory(result, o.memory) }),
              restarts: restartCount
            })
          })
        )
    })

    const tenantLayer = (tenant: string): Layer.Layer<TenantServices> => {
      const base = Layer.mergeAll(
        Workspace.layerStore,
        HistoryStore.layerStore,
        Summarizer.layerDeterministic,
        Layer.succeed(ModelRegistry, registry),
        Layer.succeed(Tokenizer, tokenizer),
        Layer.succeed(ContextCompiler, spyOn(tenant)),
        Layer.succeed(HistoryCompactor, compactor),
        CompileCache.layer,
        SessionEvents.layer
      ).pipe(Layer.provideMerge(Store.layer(rootOf(tenant))))
      const withMemory = Layer.provideMerge(Memory.layer(), base)
      return Layer.provideMerge(Layer.mergeAll(TurnEngine.layer, Controller.layer), withMemory)
    }

    const start = Effect.gen(function* () {
      const scope = yield* Scope.make()
      const contexts = new Map<string, Context.Context<TenantServices>>()
      for (const tenant of tenants) {
        const context = yield* Layer.buildWithScope(tenantLayer(tenant), scope)
        // The event bus's memory subscriber, as the gateway runs it: an ended session is persisted.
        yield* Memory.persistOnEvents().pipe(Effect.provide(context), Scope.extend(scope))
        contexts.set(tenant, context)
      }
      return { scope, tenants: contexts } satisfies Process
    })
    const stop = (p: Process) => Scope.close(p.scope, Exit.void)

    let proc: Process | undefined
    const inTenant = <A, E>(tenant: string, effect: Effect.Effect<A, E, TenantServices>) =>
      Effect.suspend(() => {
        const context = proc?.tenants.get(tenant)
        return context === undefined
          ? Effect.die(new Error(`no services for tenant ${tenant}`))
          : effect.pipe(Effect.provide(context), Effect.withClock(clockAt(offset)))
      })

    // --- what is looked at around steps

    const historyOf = (sessionId: string) =>
      Effect.gen(function* () {
        const store = yield* Store.Store
        const text = yield* store.readHistory(sessionId)
        if (text === undefined) return []
        const doc = yield* Effect.orElseSucceed(decodeHistoryText(text, sessionId), () => undefined)
        return doc === undefined ? [] : turnsOf(doc.messages.filter((m) => m.meta.kind !== "summary"))
      })
    const inputsOf = (sessionId: string) =>
      Effect.map(historyOf(sessionId), (ts) =>
        ts.flatMap((t) =>
          t.messages.flatMap((m) =>
            m.role === "user" && m.meta.kind === "input"
              ? m.parts.flatMap((p) => (p._tag === "text" ? [p.text] : []))
              : []
          )
        )
      )
    const everySession = <A>(
      f: (tenant: string, record: Store.SessionRecord) => Effect.Effect<A, unknown, TenantServices>
    ) =>
      Effect.forEach(tenants, (tenant) =>
        inTenant(
          tenant,
          Effect.gen(function* () {
            const store = yield* Store.Store
            return yield* Effect.forEach(yield* store.listSessions, (r) => f(tenant, r))
          })
        )
      ).pipe(Effect.map((lists) => lists.flat()))
    const sessionStates = everySession(
      (tenant, r): Effect.Effect<SessionState, unknown, TenantServices> =>
        Effect.map(inputsOf(r.id), (inputs) => ({
          tenant,
          id: r.id,
          state: r.state,
          concept: r.concept,
          metadata: r.metadata,
          inputs
        }))
    )
    const tasksWith = (title: string) =>
      everySession(
        (tenant, r): Effect.Effect<TasksOf, unknown, TenantServices> =>
          Effect.gen(function* () {
            const store = yield* Store.Store
            const tasks = yield* store.readTasks(r.id)
            return {
              tenant,
              id: r.id,
              state: r.state,
              concept: r.concept,
              metadata: r.metadata,
              withTitle: tasks.filter((t) => t.title === title).length
            }
          })
      )
    const l4Of = (tenant: string) =>
      inTenant(
        tenant,
        Effect.map(
          Effect.flatMap(Store.Store, (s) => s.readGlobalMemory),
          (all) => all.filter((e) => e.level === "L4").map(entryEvidence)
        )
      )
    const l2Of = (sessionId: string) =>
      Effect.map(
        Effect.flatMap(Store.Store, (s) => s.readMemory(sessionId)),
        (all) => all.filter((e) => e.level === "L2").map(entryEvidence)
      )

    const createSession = (s: NewSession) =>
      inTenant(
        s.tenant ?? DEFAULT_TENANT,
        Effect.gen(function* () {
          const store = yield* Store.Store
          yield* store.createSession({
            id: s.id,
            concept: s.concept,
            ...(s.metadata === undefined ? {} : { metadata: s.metadata })
          })
          const manifest = {
            policy: s.policy ?? "layered",
            systemPrompt: [{ type: "global", file: "system-prompt.md" }],
            ...s.manifest
          }
          yield* store.writeFile(s.id, Store.MANIFEST_FILE, `${JSON.stringify(manifest, null, 2)}\n`)
          for (const [path, text] of Object.entries(s.files ?? {})) yield* store.writeFile(s.id, path, text)
        })
      )

    // --- the steps

    const chat = (i: number, tenant: string, step: ChatStep) =>
      inTenant(
        tenant,
        Effect.gen(function* () {
          const store = yield* Store.Store
          const engine = yield* TurnEngine.TurnEngine
          const memory = yield* Memory.Memory
          const sid = step.session
          const stateBefore = (yield* store.getSession(sid)).state
          const turnsBefore = (yield* historyOf(sid)).length
          let shown: ReadonlyArray<MemoryShown> | undefined
          const plan = planSteps(step.replies)
          const outcome = yield* Effect.either(
            engine.turn({ sessionId: sid, input: step.input, model: profile.model }, scriptedDriver(plan), {
              defaultModel: profile.model,
              maxSteps: plan.length + 1,
              format: profile.format,
              tools: agentTools,
              onCompiled: (result, at) =>
                Effect.sync(() => {
                  if (shown === undefined) shown = observeMemory(result, at.options.memory)
                })
            })
          )
          const after = yield* historyOf(sid)
          const turn = Either.isRight(outcome) ? outcome.right.turn : undefined
          const l1 =
            turn === undefined
              ? undefined
              : (yield* memory.session(sid, "L1", { includeExpired: true, includeDeleted: true })).find((e) =>
                  e.sources.some((s) => s.turn === turn)
                )
          turns.push({
            step: i,
            tenant,
            session: sid,
            input: step.input,
            stateBefore,
            turnsBefore,
            turnsAfter: after.length,
            ...(turn === undefined ? {} : { turn }),
            ...(l1 === undefined ? {} : { importance: l1.importance, importanceReasons: l1.reasons }),
            ...(step.expect?.important === undefined ? {} : { important: step.expect.important }),
            ...(step.expect?.fromL4 === undefined ? {} : { fromL4: step.expect.fromL4 }),
            l2After: yield* l2Of(sid),
            ...(shown === undefined ? {} : { memory: shown }),
            restarts: restartCount
          })
          if (Either.isLeft(outcome)) return yield* Effect.fail(outcome.left)
        })
      )

    /** Ends a session; once the bus's subscriber has persisted its L2 to L4 (or `settleMs` passed), what L4 holds. */
    const end = (i: number, tenant: string, sessionId: string) =>
      inTenant(
        tenant,
        Effect.gen(function* () {
          const controller = yield* Controller.Controller
          const store = yield* Store.Store
          const { changed } = yield* controller.end(sessionId)
          if (!changed) return
          const l2 = (yield* l2Of(sessionId)).filter((e) => e.deletedAt === undefined)
          const turnsOfL2 = l2.flatMap((e) =>
            e.sources.filter((s) => s.session === sessionId).map((s) => s.turn)
          )
          const started = Date.now()
          let l4: ReadonlyArray<MemoryEntryEvidence> = []
          for (;;) {
            l4 = (yield* store.readGlobalMemory).filter((e) => e.level === "L4").map(entryEvidence)
            const covered = turnsOfL2.every((t) =>
              l4.some((e) => e.sources.some((s) => s.session === sessionId && s.turn === t))
            )
            if (covered || Date.now() - started >= settleMs) break
            yield* Effect.sleep("10 millis")
          }
          ends.push({ step: i, tenant, session: sessionId, l2, l4, waitedMs: Date.now() - started })
        })
      )

    const memoryEntry = (tenant: string, step: MemoryStep) =>
      Effect.gen(function* () {
        if (step.level === "L1") return Memory.l1Id(step.session!, step.turn!)
        if (step.level === "L2") return Memory.l2Id(step.session!, step.turn!)
        const store = yield* Store.Store
        const found = (yield* store.readGlobalMemory).filter(
          (e) => e.level === step.level && e.text.includes(step.matching!)
        )
        if (found.length !== 1)
          return yield* new ScenarioStepError({
            reason: `${found.length === 0 ? "no" : `${found.length}`} ${step.level} entries of tenant ${tenant} contain "${step.matching!.slice(0, 60)}" (one must)`
          })
        return found[0]!.id
      })

    const distribute = (i: number, tenant: string, step: Extract<ScenarioStep, { type: "distribute" }>) =>
      Effect.gen(function* () {
        const task = {
          title: step.task.title,
          ...(step.task.description === undefined ? {} : { description: step.task.description })
        }
        const filter =
          step.filter === undefined
            ? undefined
            : {
                ...(step.filter.metadata === undefined ? {} : { metadata: step.filter.metadata }),
                ...(step.filter.concept === undefined ? {} : { concept: step.filter.concept })
              }
        const before = yield* tasksWith(step.task.title)
        const keyed = step.idempotencyKey === undefined ? undefined : `${tenant}\u0000${step.idempotencyKey}`
        const retry = keyed !== undefined && keysUsed.has(keyed)
        if (keyed !== undefined) keysUsed.add(keyed)
        const outcome = yield* Effect.either(
          inTenant(
            tenant,
            Effect.flatMap(Controller.Controller, (c) =>
              c.distribute(
                {
                  task,
                  mode: step.mode,
                  ...(step.sessions === undefined ? {} : { sessions: step.sessions }),
                  ...(filter === undefined ? {} : { filter }),
                  ...(step.fromSession === undefined ? {} : { fromSession: step.fromSession })
                },
                step.idempotencyKey === undefined ? {} : { idempotencyKey: step.idempotencyKey }
              )
            )
          )
        )
        distributions.push({
          step: i,
          tenant,
          mode: step.mode,
          title: step.task.title,
          ...(step.sessions === undefined ? {} : { listed: step.sessions }),
          ...(filter === undefined ? {} : { filter }),
          ...(step.fromSession === undefined ? {} : { fromSession: step.fromSession }),
          ...(step.idempotencyKey === undefined ? {} : { idempotencyKey: step.idempotencyKey }),
          retry,
          before,
          after: yield* tasksWith(step.task.title),
          ...(Either.isRight(outcome)
            ? {
                results: outcome.right.results.map((r) =>
                  "taskId" in r
                    ? { session: r.session, taskId: r.taskId }
                    : { session: r.session, skipped: r.skipped }
                )
              }
            : { error: errorOf(outcome.left) })
        })
        if (Either.isLeft(outcome)) return yield* Effect.fail(outcome.left)
      })

    const aggregateStep = (i: number, tenant: string, step: Extract<ScenarioStep, { type: "aggregate" }>) =>
      Effect.gen(function* () {
        const sessions = yield* sessionStates
        const outcome = yield* Effect.either(
          inTenant(
            tenant,
            aggregate({
              sessions: step.sessions,
              query: step.query,
              model: step.model ?? profile.model,
              defaultModel: profile.model,
              format: step.format ?? profile.format,
              tools: agentTools
            })
          )
        )
        const base = { step: i, tenant, listed: step.sessions, query: step.query, sessions }
        if (Either.isLeft(outcome)) {
          aggregates.push({ ...base, error: errorOf(outcome.left) })
          return yield* Effect.fail(outcome.left)
        }
        const r = outcome.right
        const texts = textsOf(r.request)
        aggregates.push({
          ...base,
          blocks: r.blocks.map((b) => ({
            id: b.id,
            session: b.session,
            ...(b.level === undefined ? {} : { level: b.level }),
            source: b.source,
            status: b.status,
            provenance: b.provenance.map((p) => ({
              session: p.session,
              ...(p.level === undefined ? {} : { level: p.level }),
              source: p.source,
              unit: p.unit
            }))
          })),
          sections: sectionsOf(texts),
          skipped: r.skipped.map((s) => ({ session: s.session, reason: s.reason }))
        })
        const recount = r.format === "openai" ? recountAggregate(profile.id, r.request.messages) : undefined
        budgets.push({
          step: i,
          what: "aggregate",
          tenant,
          session: step.sessions.join(","),
          model: profile.id,
          ...observeLedger(r.report),
          ...(recount === undefined ? {} : { recount }),
          restarts: restartCount
        })
      })

    /** A plan-execute-reflect run with the scenario's model: each role's answers in order, each specialist's replies. */
    const runStep = (i: number, tenant: string, step: RunStep) =>
      inTenant(
        tenant,
        Effect.gen(function* () {
          const store = yield* Store.Store
          const asked: Array<string> = []
          const queues = new Map<string, Array<string>>()
          const specialistContexts: Array<{ stepId: string; texts: ReadonlyArray<string> }> = []
          const events: Array<string> = []
          const model: Orchestrator.RunModel<Error, never> = {
            ask: (role) =>
              Effect.suspend(() => {
                asked.push(role)
                if (!queues.has(role))
                  queues.set(
                    role,
                    (step.model[role] ?? []).map((r) => (typeof r === "string" ? r : JSON.stringify(r)))
                  )
                const text = queues.get(role)!.shift()
                return text === undefined
                  ? Effect.fail(new Error(`the scenario scripts no more answers for the ${role}`))
                  : Effect.succeed({ text })
              }),
            specialist: ({ step: planned }) =>
              Effect.succeed(
                scriptedDriver(
                  planSteps(
                    step.model.specialists?.[planned.id] ?? [
                      { type: "assistant", text: `(no scripted reply for step ${planned.id})` }
                    ]
                  )
                )
              )
          }
          const runId = Orchestrator.runIdOf(step.session, step.idempotencyKey ?? `scenario-step-${i}`)
          const outcome = yield* Effect.either(
            Orchestrator.run(
              {
                sessionId: step.session,
                goal: step.goal,
                model: profile.model,
                idempotencyKey: step.idempotencyKey ?? `scenario-step-${i}`
              },
              model,
              {
                defaultModel: profile.model,
                limits: {
                  maxReflections: step.limits?.maxReflections ?? Orchestrator.DEFAULT_LIMITS.maxReflections,
                  maxSteps: step.limits?.maxSteps ?? Orchestrator.DEFAULT_LIMITS.maxSteps,
                  specialistBudget:
                    step.limits?.specialistBudget ?? Orchestrator.DEFAULT_LIMITS.specialistBudget
                },
                maxToolSteps: 8,
                tools: agentTools,
                emit: (e) => Effect.sync(() => void events.push(e.type)),
                onSpecialistCompiled: (stepId, compiled) =>
                  Effect.sync(
                    () => void specialistContexts.push({ stepId, texts: textsOf(compiled.request) })
                  )
              }
            )
          )
          const state = yield* Effect.orElseSucceed(store.readRun(step.session, runId), () => undefined)
          const history = yield* historyOf(step.session)
          const turn = history.find((t) => t.turn === state?.turn)
          const answer = state?.finalAnswer
          runs.push({
            step: i,
            tenant,
            session: step.session,
            goal: step.goal,
            runId,
            ...(state === undefined ? {} : { state }),
            asked,
            events,
            specialistContexts,
            goalInputs: history
              .flatMap((t) => t.messages)
              .filter(
                (m) =>
                  m.role === "user" &&
                  m.meta.kind === "input" &&
                  m.meta.inputKey === `run:${runId}` &&
                  textOf(m) === step.goal
              ).length,
            finals: (turn?.messages ?? []).filter((m) => m.meta.kind === "final").map(textOf),
            answerOccurrences:
              answer === undefined || answer === ""
                ? 0
                : history
                    .flatMap((t) => t.messages)
                    .filter((m) => m.role === "assistant" && textOf(m).includes(answer)).length,
            ...(step.expect === undefined ? {} : { expect: step.expect })
          })
          if (Either.isLeft(outcome)) return yield* Effect.fail(outcome.left)
        })
      )

    const restart = (i: number, advanceMs: number) =>
      Effect.gen(function* () {
        const before: Record<string, ReadonlyArray<MemoryEntryEvidence>> = {}
        for (const t of tenants) before[t] = yield* l4Of(t)
        if (proc !== undefined) yield* stop(proc)
        proc = undefined
        offset += advanceMs
        restartCount++
        proc = yield* Effect.withClock(start, clockAt(offset))
        const after: Record<string, ReadonlyArray<MemoryEntryEvidence>> = {}
        for (const t of tenants) after[t] = yield* l4Of(t)
        restarts.push({ step: i, advanceMs, before, after })
      })

    const run = (i: number, step: ScenarioStep): Effect.Effect<void, unknown> => {
      const tenant = "tenant" in step && step.tenant !== undefined ? step.tenant : DEFAULT_TENANT
      switch (step.type) {
        case "chat":
          return chat(i, tenant, step)
        case "pause":
        case "resume":
          return inTenant(
            tenant,
            Effect.flatMap(Controller.Controller, (c) => c[step.type](step.session))
          )
        case "end":
          return end(i, tenant, step.session)
        case "addTask":
          return inTenant(
            tenant,
            Effect.gen(function* () {
              const task = yield* (yield* Controller.Controller).addTask(step.session, {
                title: step.title,
                ...(step.description === undefined ? {} : { description: step.description })
              })
              if (step.as !== undefined) taskIds.set(step.as, task.id)
            })
          )
        case "updateTask":
          return inTenant(
            tenant,
            Effect.flatMap(Controller.Controller, (c) =>
              c.updateTask(step.session, taskIds.get(step.task) ?? step.task, {
                ...(step.status === undefined ? {} : { status: step.status }),
                ...(step.title === undefined ? {} : { title: step.title })
              })
            )
          )
        case "distribute":
          return distribute(i, tenant, step)
        case "aggregate":
          return aggregateStep(i, tenant, step)
        case "pinMemory":
        case "deleteMemory":
          return inTenant(
            tenant,
            Effect.gen(function* () {
              const memory = yield* Memory.Memory
              const id = yield* memoryEntry(tenant, step)
              if (step.type === "pinMemory")
                yield* memory.pin(step.level, id, step.pinned ?? true, step.session)
              else yield* memory.remove(step.level, id, step.session)
            })
          )
        case "persist":
          return inTenant(
            tenant,
            Effect.flatMap(Memory.Memory, (m) => m.persist(step.session))
          )
        case "restart":
          return restart(i, step.advanceMs ?? 0)
        case "createSession":
          return createSession(step)
        case "run":
          return runStep(i, tenant, step)
      }
    }

    const play = Effect.gen(function* () {
      for (const t of tenants)
        seed(rootOf(t), t === DEFAULT_TENANT ? scenario.data : scenario.tenants?.[t], options.root)
      proc = yield* Effect.withClock(start, clockAt(offset))
      for (const s of scenario.sessions) yield* createSession(s)
      for (const [i, step] of scenario.steps.entries()) {
        current = i
        const started = performance.now()
        const tenant = "tenant" in step && step.tenant !== undefined ? step.tenant : DEFAULT_TENANT
        const outcome = yield* Effect.either(Effect.catchAllDefect(run(i, step), (d) => Effect.fail(d)))
        const expectError = "expect" in step ? step.expect?.error : undefined
        steps.push({
          step: i,
          type: step.type,
          tenant,
          ...("session" in step && step.session !== undefined ? { session: step.session } : {}),
          ...(expectError === undefined ? {} : { expectError }),
          ...(Either.isLeft(outcome) ? { error: errorOf(outcome.left) } : {}),
          ms: Math.round(performance.now() - started)
        })
      }
      current = scenario.steps.length
      return yield* everySession((tenant, r) =>
        Effect.map(l2Of(r.id), (entries) => ({ tenant, session: r.id, entries }))
      )
    })

    // A scenario that cannot be played (its data folder missing, a session that cannot be created)
    // is evidence too: the steps invariant reports it.
    const outcome = yield* Effect.either(Effect.catchAllDefect(play, (d) => Effect.fail(d)))
    if (proc !== undefined) yield* stop(proc)
    const evidence: ScenarioEvidence = {
      scenario: scenario.id,
      model: profile.id,
      steps,
      budgets: budgets.sort((a, b) => a.step - b.step),
      aggregates,
      turns,
      ends,
      restarts,
      distributions,
      runs,
      finalL2: Either.isRight(outcome) ? outcome.right : [],
      ...(Either.isLeft(outcome)
        ? { failure: `${errorOf(outcome.left).tag}: ${errorOf(outcome.left).message}` }
        : {}),
      ...(options.keep === true ? { dataDir: dir } : {})
    }
    return evidence
  }).pipe(Effect.scoped)
