/**
 * The controller of many sessions: their lifecycle (pause, resume, end), their tasks, and the
 * distribution of one task to many sessions. Effect functions over the store (the only owner of
 * the data root) and the event bus (`SessionEvents`); the gateway's handlers and the CLI call them.
 *
 * - Lifecycle: a transition holds the session's lock, so it waits for a running turn (like a
 *   deletion): once a pause answers, no turn runs in the session until it is resumed, and once an
 *   end answers none ever will. A transition that changes the state publishes
 *   `SessionStateChanged` after the record is written; asking for the current state changes and
 *   publishes nothing. The rules are `Lifecycle.transition`.
 * - Tasks: `<session>/tasks.json`, read and rewritten under the session's lock. A paused session
 *   takes tasks (it finds them when resumed); an ended one takes none and its tasks no longer
 *   change (`SessionNotActive`).
 * - Distribution: `broadcast` adds the task to every listed session, or to every session when none
 *   is listed (except the session it comes from); `filtered` first keeps the sessions whose
 *   metadata has every pair of `filter.metadata` and whose concept contains `filter.concept`
 *   (case-insensitive). Ended sessions are skipped and reported with the reason, as are listed
 *   sessions that do not exist (another tenant's do not, for this tenant) or do not match the
 *   filter; paused sessions receive the task. The distribution is written (with each session's
 *   task id) before any task is added and again when all are: a retry with the same idempotency
 *   key answers the same distribution (finishing one a crash cut short), never adding a task twice;
 *   the same key with another request is `DistributionConflict`.
 */
import { problemOf } from "@ctxo/store/DecodeError"
import {
  type Distribution,
  type DistributionFilter,
  type DistributionMode,
  type DistributionRequest,
  type DistributionResult,
  SessionMetadata,
  type SessionRecord,
  type Task,
  type TaskOrigin,
  type TaskStatus
} from "@ctxo/store/Records"
import { Store, sessionLocks } from "@ctxo/store/Store"
import type { StoreError } from "@ctxo/store/StoreErrors"
import { Context, Effect, Either, Layer, Schema } from "effect"
import { type Action, SessionNotActive, transition } from "./Lifecycle.ts"
import {
  SessionEvents,
  SessionStateChanged,
  TaskAdded,
  TasksDistributed,
  TaskUpdated
} from "./SessionEvents.ts"

/** A session has no task of this id. */
export class TaskNotFound extends Schema.TaggedError<TaskNotFound>("@ctxo/agent/TaskNotFound")(
  "TaskNotFound",
  {
    sessionId: Schema.String,
    taskId: Schema.String
  }
) {
  override get message() {
    return `Session ${this.sessionId} has no task ${this.taskId.slice(0, 120)}`
  }
}

/** An idempotency key reused for another distribution: the first one keeps the key. */
export class DistributionConflict extends Schema.TaggedError<DistributionConflict>(
  "@ctxo/agent/DistributionConflict"
)("DistributionConflict", { key: Schema.String, distributionId: Schema.String }) {
  override get message() {
    return `Idempotency key ${JSON.stringify(this.key.slice(0, 120))} was used for another distribution (${this.distributionId}); send a new key for a new distribution`
  }
}

/** A request the controller cannot act on: the field and why (metadata over its limits, a filter missing). */
export class InvalidControllerInput extends Schema.TaggedError<InvalidControllerInput>(
  "@ctxo/agent/InvalidControllerInput"
)("InvalidControllerInput", { field: Schema.String, reason: Schema.String }) {
  override get message() {
    return `${this.field}: ${this.reason}`
  }
}

export interface Transitioned {
  readonly session: SessionRecord
  /** False when the session already was in the state asked for. */
  readonly changed: boolean
}

export interface SessionUpdate {
  readonly concept?: string
  /** Merged into the metadata: a string sets a key, `null` removes it. */
  readonly metadata?: Readonly<Record<string, string | null>>
}

export interface NewTask {
  readonly title: string
  readonly description?: string
}

export interface TaskChange {
  readonly status?: TaskStatus
  readonly title?: string
  /** A new description; `null` removes it. */
  readonly description?: string | null
}

export interface DistributeRequest {
  readonly task: NewTask
  readonly mode: DistributionMode
  /** The sessions to consider (default: every session of the data root). */
  readonly sessions?: ReadonlyArray<string>
  /** `filtered` only, and required there. */
  readonly filter?: DistributionFilter
  /** The session the task comes from (it must exist; it is not a target unless listed). */
  readonly fromSession?: string
}

export interface Distributed {
  readonly distributionId: string
  readonly createdAt: string
  readonly mode: DistributionMode
  /** True when this answers an earlier request with the same idempotency key. */
  readonly replayed: boolean
  readonly results: ReadonlyArray<DistributionResult>
}

export type ControllerError =
  | StoreError
  | SessionNotActive
  | import("./Lifecycle.ts").IllegalTransition
  | TaskNotFound
  | DistributionConflict
  | InvalidControllerInput

export interface Service {
  readonly pause: (sessionId: string) => Effect.Effect<Transitioned, ControllerError>
  readonly resume: (sessionId: string) => Effect.Effect<Transitioned, ControllerError>
  readonly end: (sessionId: string) => Effect.Effect<Transitioned, ControllerError>
  /** Changes a session's concept or metadata (under its lock). */
  readonly update: (sessionId: string, update: SessionUpdate) => Effect.Effect<SessionRecord, ControllerError>
  readonly tasks: (sessionId: string) => Effect.Effect<ReadonlyArray<Task>, ControllerError>
  readonly addTask: (sessionId: string, task: NewTask) => Effect.Effect<Task, ControllerError>
  readonly updateTask: (
    sessionId: string,
    taskId: string,
    change: TaskChange
  ) => Effect.Effect<Task, ControllerError>
  readonly distribute: (
    request: DistributeRequest,
    options?: { readonly idempotencyKey?: string }
  ) => Effect.Effect<Distributed, ControllerError>
}

export class Controller extends Context.Tag("@ctxo/agent/Controller")<Controller, Service>() {}

const newId = (prefix: string) =>
  `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8).padEnd(6, "0")}`

/** The request as kept and compared: sessions deduplicated, metadata keys sorted, no empty fields. */
export const normalizeRequest = (request: DistributeRequest): DistributionRequest => {
  const metadata = request.filter?.metadata
  const filter =
    request.filter === undefined
      ? undefined
      : {
          ...(metadata === undefined
            ? {}
            : {
                metadata: Object.fromEntries(Object.entries(metadata).sort(([a], [b]) => (a < b ? -1 : 1)))
              }),
          ...(request.filter.concept === undefined ? {} : { concept: request.filter.concept })
        }
  return {
    task: {
      title: request.task.title,
      ...(request.task.description === undefined ? {} : { description: request.task.description })
    },
    mode: request.mode,
    ...(request.sessions === undefined ? {} : { sessions: [...new Set(request.sessions)] }),
    ...(filter === undefined ? {} : { filter }),
    ...(request.fromSession === undefined ? {} : { fromSession: request.fromSession })
  }
}

/** Why a distribution request cannot run, if it cannot. */
export const requestProblem = (request: DistributionRequest): InvalidControllerInput | undefined => {
  if (request.task.title.trim() === "")
    return new InvalidControllerInput({ field: "task.title", reason: "a task needs a title" })
  const filter = request.filter
  const empty =
    filter === undefined || (Object.keys(filter.metadata ?? {}).length === 0 && filter.concept === undefined)
  if (request.mode === "filtered" && empty)
    return new InvalidControllerInput({
      field: "filter",
      reason:
        'mode filtered needs a filter: metadata pairs ({ "team": "physics" }) and/or a concept substring'
    })
  if (request.mode === "broadcast" && filter !== undefined)
    return new InvalidControllerInput({
      field: "filter",
      reason: "a filter applies to mode filtered only (broadcast sends to every session considered)"
    })
  return undefined
}

/** Whether a session is selected by a filter: every metadata pair equal, the concept containing the text. */
export const matches = (record: SessionRecord, filter: DistributionFilter): boolean =>
  Object.entries(filter.metadata ?? {}).every(([key, value]) => record.metadata[key] === value) &&
  (filter.concept === undefined || record.concept.toLowerCase().includes(filter.concept.toLowerCase()))

/**
 * What a distribution plans for each session it considers, before anything is added: a new task id
 * per target, the reason for each session skipped. Listed sessions keep their order and are all
 * reported; without a list, every session in the index's order, and those a filter leaves out are
 * not mentioned.
 */
export const plan = (
  request: DistributionRequest,
  sessions: ReadonlyArray<SessionRecord>,
  newTaskId: () => string
): ReadonlyArray<DistributionResult> => {
  const byId = new Map(sessions.map((s) => [s.id, s]))
  const listed = request.sessions !== undefined
  const considered = request.sessions ?? sessions.map((s) => s.id).filter((id) => id !== request.fromSession)
  const results: Array<DistributionResult> = []
  for (const id of considered) {
    const record = byId.get(id)
    if (record === undefined) {
      results.push({ session: id, skipped: "not_found", message: `No session ${id.slice(0, 120)}` })
      continue
    }
    if (request.mode === "filtered" && request.filter !== undefined && !matches(record, request.filter)) {
      if (listed)
        results.push({
          session: id,
          skipped: "not_matched",
          message: `Session ${id} does not match the filter`
        })
      continue
    }
    if (record.state === "ended")
      results.push({ session: id, skipped: "ended", message: `Session ${id} is ended` })
    else results.push({ session: id, taskId: newTaskId() })
  }
  return results
}

const fromEither = <A, E>(either: Either.Either<A, E>): Effect.Effect<A, E> =>
  Either.match(either, { onLeft: Effect.fail, onRight: Effect.succeed })

const validMetadata = Schema.decodeUnknownEither(SessionMetadata, { onExcessProperty: "error" })

export const make: Effect.Effect<Service, never, Store | SessionEvents> = Effect.gen(function* () {
  const store = yield* Store
  const events = yield* SessionEvents
  // One distribution per idempotency key (and data root) at a time; dropped when idle.
  const keyLock = sessionLocks("@ctxo/agent/Controller/distribute")

  const changeState = (action: Action) =>
    Effect.fn(`Controller.${action}`)(function* (sessionId: string) {
      return yield* store.withSessionLock(
        sessionId,
        Effect.gen(function* () {
          const record = yield* store.getSession(sessionId)
          const to = yield* fromEither(transition(sessionId, record.state, action))
          if (to === record.state) return { session: record, changed: false }
          const session = yield* store.updateSession(sessionId, { state: to })
          yield* events.publish(
            SessionStateChanged.make({
              scope: yield* store.scope,
              sessionId,
              from: record.state,
              to,
              at: session.stateChangedAt
            })
          )
          return { session, changed: true }
        })
      )
    })

  const update = Effect.fn("Controller.update")(function* (sessionId: string, change: SessionUpdate) {
    return yield* store.withSessionLock(
      sessionId,
      Effect.gen(function* () {
        const record = yield* store.getSession(sessionId)
        let metadata: Record<string, string> | undefined
        if (change.metadata !== undefined) {
          const merged: Record<string, string> = { ...record.metadata }
          for (const [key, value] of Object.entries(change.metadata))
            if (value === null) delete merged[key]
            else merged[key] = value
          metadata = yield* fromEither(
            Either.mapLeft(
              validMetadata(merged),
              (e) => new InvalidControllerInput({ field: "metadata", reason: problemOf(e) })
            )
          )
        }
        return yield* store.updateSession(sessionId, {
          ...(change.concept === undefined ? {} : { concept: change.concept }),
          ...(metadata === undefined ? {} : { metadata })
        })
      })
    )
  })

  /** The session's record, when it may change its tasks (not ended). */
  const changeable = (sessionId: string, operation: string) =>
    Effect.flatMap(store.getSession(sessionId), (record) =>
      record.state === "ended"
        ? Effect.fail(new SessionNotActive({ sessionId, state: record.state, operation }))
        : Effect.succeed(record)
    )

  /** Adds a task; with `preset`, the task of that id once (a distribution retried finds it there). */
  const add = (
    sessionId: string,
    task: NewTask,
    preset?: { readonly id: string; readonly origin: TaskOrigin }
  ): Effect.Effect<Task, ControllerError> =>
    store.withSessionLock(
      sessionId,
      Effect.gen(function* () {
        const tasks = yield* store.readTasks(sessionId)
        const existing = preset === undefined ? undefined : tasks.find((t) => t.id === preset.id)
        if (existing !== undefined) return existing
        yield* changeable(sessionId, "take a new task")
        const now = new Date().toISOString()
        const added: Task = {
          id: preset?.id ?? newId("t"),
          title: task.title,
          ...(task.description === undefined ? {} : { description: task.description }),
          status: "pending",
          createdAt: now,
          updatedAt: now,
          ...(preset === undefined ? {} : { origin: preset.origin })
        }
        yield* store.writeTasks(sessionId, [...tasks, added])
        yield* events.publish(TaskAdded.make({ scope: yield* store.scope, sessionId, task: added }))
        return added
      })
    )

  const addTask = Effect.fn("Controller.addTask")(function* (sessionId: string, task: NewTask) {
    if (task.title.trim() === "")
      return yield* new InvalidControllerInput({ field: "title", reason: "a task needs a title" })
    return yield* add(sessionId, task)
  })

  const updateTask = Effect.fn("Controller.updateTask")(function* (
    sessionId: string,
    taskId: string,
    change: TaskChange
  ) {
    if (change.title !== undefined && change.title.trim() === "")
      return yield* new InvalidControllerInput({ field: "title", reason: "a task needs a title" })
    return yield* store.withSessionLock(
      sessionId,
      Effect.gen(function* () {
        yield* changeable(sessionId, "change its tasks")
        const tasks = yield* store.readTasks(sessionId)
        const at = tasks.findIndex((t) => t.id === taskId)
        const previous = tasks[at]
        if (previous === undefined) return yield* new TaskNotFound({ sessionId, taskId })
        const { description: _, ...rest } = previous
        const description = change.description === undefined ? previous.description : change.description
        const next: Task = {
          ...rest,
          ...(change.title === undefined ? {} : { title: change.title }),
          ...(change.status === undefined ? {} : { status: change.status }),
          ...(description === undefined || description === null ? {} : { description }),
          updatedAt: new Date().toISOString()
        }
        // A change to what the task already is (a retry) writes and publishes nothing.
        if (
          next.title === previous.title &&
          next.status === previous.status &&
          next.description === previous.description
        )
          return previous
        yield* store.writeTasks(
          sessionId,
          tasks.map((t, i) => (i === at ? next : t))
        )
        yield* events.publish(
          TaskUpdated.make({ scope: yield* store.scope, sessionId, task: next, previous })
        )
        return next
      })
    )
  })

  /** Adds the planned tasks (a few sessions at a time: each may wait for its running turn), then records the results. */
  const deliver = (distribution: Distribution) =>
    Effect.gen(function* () {
      const origin: TaskOrigin = {
        distributionId: distribution.id,
        ...(distribution.request.fromSession === undefined
          ? {}
          : { fromSession: distribution.request.fromSession })
      }
      const results = yield* Effect.forEach(
        distribution.results,
        (result): Effect.Effect<DistributionResult, ControllerError> =>
          "taskId" in result
            ? add(result.session, distribution.request.task, { id: result.taskId, origin }).pipe(
                Effect.as(result),
                Effect.catchTags({
                  SessionNotActive: (e) =>
                    Effect.succeed<DistributionResult>({
                      session: result.session,
                      skipped: "ended",
                      message: `Session ${e.sessionId} is ended`
                    }),
                  SessionNotFound: () =>
                    Effect.succeed<DistributionResult>({
                      session: result.session,
                      skipped: "not_found",
                      message: `No session ${result.session}`
                    })
                })
              )
            : Effect.succeed(result),
        { concurrency: 8 }
      )
      const done: Distribution = { ...distribution, results, complete: true }
      yield* store.putDistribution(done)
      yield* events.publish(
        TasksDistributed.make({ scope: yield* store.scope, distributionId: done.id, results })
      )
      return done
    })

  const answer = (distribution: Distribution, replayed: boolean): Distributed => ({
    distributionId: distribution.id,
    createdAt: distribution.createdAt,
    mode: distribution.request.mode,
    replayed,
    results: distribution.results
  })

  const distribute = Effect.fn("Controller.distribute")(function* (
    input: DistributeRequest,
    options: { readonly idempotencyKey?: string } = {}
  ) {
    const request = normalizeRequest(input)
    const problem = requestProblem(request)
    if (problem !== undefined) return yield* problem
    const key = options.idempotencyKey
    const run = Effect.gen(function* () {
      if (key !== undefined) {
        const earlier = (yield* store.listDistributions).find((d) => d.idempotencyKey === key)
        if (earlier !== undefined) {
          if (JSON.stringify(normalizeRequest(earlier.request)) !== JSON.stringify(request))
            return yield* new DistributionConflict({ key, distributionId: earlier.id })
          return answer(earlier.complete ? earlier : yield* deliver(earlier), true)
        }
      }
      if (request.fromSession !== undefined) yield* store.getSession(request.fromSession)
      const planned: Distribution = {
        id: newId("d"),
        createdAt: new Date().toISOString(),
        ...(key === undefined ? {} : { idempotencyKey: key }),
        request,
        results: plan(request, yield* store.listSessions, () => newId("t")),
        complete: false
      }
      yield* store.putDistribution(planned)
      return answer(yield* deliver(planned), false)
    })
    if (key === undefined) return yield* run
    return yield* keyLock(`${yield* store.scope}\u0000${key}`, run)
  })

  return {
    pause: changeState("pause"),
    resume: changeState("resume"),
    end: changeState("end"),
    update,
    tasks: (sessionId) => store.readTasks(sessionId),
    addTask,
    updateTask,
    distribute
  } satisfies Service
})

export const layer: Layer.Layer<Controller, never, Store | SessionEvents> = Layer.effect(Controller, make)
