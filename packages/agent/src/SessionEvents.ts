/**
 * The event bus of sessions: lifecycle transitions and task events, published by the controller
 * (`Controller.ts`) after what they report is written, on an Effect `PubSub`.
 *
 * Delivery: the hub is unbounded, so a publisher never waits and a subscriber misses nothing
 * published after its `subscribe` returned (a slow one only queues). A subscriber subscribes
 * first (in a scope it keeps open), then takes: `Stream.fromPubSub` subscribes only when the
 * stream starts running, so a forked stream may miss the first events. Events of one session
 * arrive in the order of its transitions (they are published under its lock). Delivery is in
 * process: events published while no subscriber listens, or before a crash, are not replayed; the
 * state itself is in the store (`sessions.json`, `tasks.json`), so a subscriber that starts late
 * reads it there.
 *
 * Every event carries `scope`, the store's scope (which data root, for a gateway with tenants the
 * tenant's): two tenants' sessions of the same id are told apart by it.
 */
import { DistributionResult, SessionState, Task } from "@ctxo/store/Records"
import { Context, Effect, Layer, PubSub, type Queue, Schema, type Scope } from "effect"

/** A session moved from one state to another (`at` is its record's `stateChangedAt`). */
export const SessionStateChanged = Schema.TaggedStruct("SessionStateChanged", {
  scope: Schema.String,
  sessionId: Schema.String,
  from: SessionState,
  to: SessionState,
  at: Schema.String
})
export type SessionStateChanged = typeof SessionStateChanged.Type

/** A task was added to a session (by hand or by a distribution: see its `origin`). */
export const TaskAdded = Schema.TaggedStruct("TaskAdded", {
  scope: Schema.String,
  sessionId: Schema.String,
  task: Task
})
export type TaskAdded = typeof TaskAdded.Type

/** A task of a session changed (its status, title or description). */
export const TaskUpdated = Schema.TaggedStruct("TaskUpdated", {
  scope: Schema.String,
  sessionId: Schema.String,
  task: Task,
  previous: Task
})
export type TaskUpdated = typeof TaskUpdated.Type

/** A distribution finished: what it did in each session. */
export const TasksDistributed = Schema.TaggedStruct("TasksDistributed", {
  scope: Schema.String,
  distributionId: Schema.String,
  results: Schema.Array(DistributionResult)
})
export type TasksDistributed = typeof TasksDistributed.Type

/** Persist the data root's agent-level memory (L3) to the global level (L4): the memory timer's tick. */
export const MemoryPersistRequested = Schema.TaggedStruct("MemoryPersistRequested", {
  scope: Schema.String
})
export type MemoryPersistRequested = typeof MemoryPersistRequested.Type

export const SessionEvent = Schema.Union(
  SessionStateChanged,
  TaskAdded,
  TaskUpdated,
  TasksDistributed,
  MemoryPersistRequested
)
export type SessionEvent = typeof SessionEvent.Type

export interface Service {
  readonly publish: (event: SessionEvent) => Effect.Effect<void>
  /** A subscription: every event published after it returns, until its scope closes. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<SessionEvent>, never, Scope.Scope>
}

export class SessionEvents extends Context.Tag("@ctxo/agent/SessionEvents")<SessionEvents, Service>() {}

/** A bus for the scope it is made in (shut down with it). */
export const make: Effect.Effect<Service, never, Scope.Scope> = Effect.gen(function* () {
  const hub = yield* Effect.acquireRelease(PubSub.unbounded<SessionEvent>(), PubSub.shutdown)
  return {
    publish: (event) => Effect.asVoid(PubSub.publish(hub, event)),
    subscribe: PubSub.subscribe(hub)
  }
})

export const layer: Layer.Layer<SessionEvents> = Layer.scoped(SessionEvents, make)
