/**
 * `ctxo sessions` and `ctxo tasks`: the lifecycle of sessions, their tasks and the distribution of
 * a task to many sessions, on a data root directory, through the same controller the gateway's
 * `/api/sessions/:id/pause|resume|end`, `/api/sessions/:id/tasks` and `/api/tasks/distribute` call.
 * Readable output by default, `--json` for scripts.
 */
import * as Controller from "@ctxo/agent/Controller"
import * as Memory from "@ctxo/agent/Memory"
import * as SessionEvents from "@ctxo/agent/SessionEvents"
import type { DistributionResult, SessionRecord, Task } from "@ctxo/store/Records"
import { TaskStatus } from "@ctxo/store/Records"
import * as Store from "@ctxo/store/Store"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Console, Effect, HashMap, Layer, Option } from "effect"
import type { CommandHelp, Example } from "./internal/help.ts"
import { dataOption } from "./internal/options.ts"

const data = dataOption(
  "The data root: sessions.json and one directory per session. Defaults to ./data, the live data root of the gateway (`pnpm start`). Changes are written there; while a gateway serves the same directory, prefer its HTTP API (the two processes do not share locks)."
)
const json = Options.boolean("json").pipe(
  Options.withDescription("Print the result as JSON instead of text.")
)
const sessionId = Args.text({ name: "id" }).pipe(
  Args.withDescription("The session: its id in the data root (as `ctxo sessions list` shows it).")
)
const session = Options.text("session").pipe(
  Options.withAlias("s"),
  Options.withPseudoName("ID"),
  Options.withDescription("The session whose tasks these are.")
)

/** The controller over the data root (events go to a bus of this command only). */
const controllerOn = (root: string) =>
  Layer.merge(Controller.layer, Memory.layer()).pipe(
    Layer.provide(Layer.merge(Store.layer(root), SessionEvents.layer))
  )

const print = (asJson: boolean, value: unknown, text: () => string) =>
  Console.log(asJson ? JSON.stringify(value, null, 2) : text())

const metadataText = (metadata: Readonly<Record<string, string>>) =>
  Object.entries(metadata)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ")

const sessionLine = (s: SessionRecord) =>
  `${s.id.padEnd(24)} ${s.state.padEnd(7)} since ${s.stateChangedAt}  ${s.concept}${Object.keys(s.metadata).length === 0 ? "" : `  [${metadataText(s.metadata)}]`}`

const taskLine = (t: Task) =>
  `${t.id.padEnd(22)} ${t.status.padEnd(11)} ${t.title}${t.origin === undefined ? "" : `  (from ${t.origin.distributionId}${t.origin.fromSession === undefined ? "" : `, session ${t.origin.fromSession}`})`}`

// --- ctxo sessions

const listSessions = Command.make("list", { data, json }, (args) =>
  Effect.gen(function* () {
    const store = yield* Store.Store
    const sessions = yield* store.listSessions
    yield* print(args.json, sessions, () =>
      sessions.length === 0 ? "no sessions" : sessions.map(sessionLine).join("\n")
    )
  }).pipe(Effect.provide(Store.layer(args.data)))
).pipe(
  Command.withDescription(
    "List the sessions with their state (active, paused, ended), since when, concept and metadata."
  )
)

const transition = (action: "pause" | "resume" | "end", description: string) =>
  Command.make(action, { data, json, id: sessionId }, (args) =>
    Effect.gen(function* () {
      const controller = yield* Controller.Controller
      const { session, changed } = yield* controller[action](args.id)
      // The gateway's event bus persists an ended session's memory (L2 -> L3 -> L4); a command
      // has no bus that outlives it, so it does the same at once.
      if (action === "end" && changed) {
        const memory = yield* Memory.Memory
        yield* memory.aggregate([args.id])
        yield* memory.persist(args.id)
      }
      yield* print(args.json, session, () =>
        changed
          ? `${session.id}: ${session.state} since ${session.stateChangedAt}`
          : `${session.id} is already ${session.state}`
      )
    }).pipe(Effect.provide(controllerOn(args.data)))
  ).pipe(Command.withDescription(description))

const meta = Options.keyValueMap("meta").pipe(
  Options.withPseudoName("KEY=VALUE"),
  Options.withDescription(
    "Set a metadata key (repeat for more); what `ctxo tasks distribute --filter` selects on."
  ),
  Options.optional
)
const unset = Options.text("unset").pipe(
  Options.withPseudoName("KEY,KEY"),
  Options.withDescription("Remove metadata keys, comma-separated."),
  Options.optional
)
const concept = Options.text("concept").pipe(
  Options.withPseudoName("TEXT"),
  Options.withDescription("The session's new concept."),
  Options.optional
)

const updateSession = Command.make("update", { data, json, id: sessionId, meta, unset, concept }, (args) =>
  Effect.gen(function* () {
    const controller = yield* Controller.Controller
    const metadata: Record<string, string | null> = {}
    for (const [k, v] of Option.getOrElse(args.meta, () => HashMap.empty<string, string>())) metadata[k] = v
    for (const k of Option.getOrElse(args.unset, () => "").split(","))
      if (k.trim() !== "") metadata[k.trim()] = null
    const updated = yield* controller.update(args.id, {
      ...(Object.keys(metadata).length === 0 ? {} : { metadata }),
      ...Option.match(args.concept, { onNone: () => ({}), onSome: (c) => ({ concept: c }) })
    })
    yield* print(args.json, updated, () => sessionLine(updated))
  }).pipe(Effect.provide(controllerOn(args.data)))
).pipe(
  Command.withDescription(
    "Change a session's concept or metadata (merged: --meta sets a key, --unset removes one)."
  )
)

const pauseSession = transition(
  "pause",
  "Pause a session: it takes no turn (chat, /v1) until resumed; its files, tasks and previews stay. Pausing a paused session changes nothing."
)
const resumeSession = transition("resume", "Resume a paused session. An ended session cannot be resumed.")
const endSession = transition(
  "end",
  "End a session, for good: no more turns, tasks or task changes; its important memory (L2) is aggregated into L3 and persisted to L4."
)

export const sessionsCommand = Command.make("sessions").pipe(
  Command.withDescription(
    "List sessions and move them through their lifecycle: pause (no turns until resumed), resume, end (final); change their metadata."
  ),
  Command.withSubcommands([listSessions, pauseSession, resumeSession, endSession, updateSession])
)

export const sessionsSubcommands: ReadonlyArray<CommandHelp> = [
  {
    command: listSessions,
    examples: [
      {
        says: "The sessions of the example data and their states:",
        command: "ctxo sessions list --data fixtures/data"
      },
      { says: "As JSON:", command: "ctxo sessions list --json" }
    ]
  },
  {
    command: pauseSession,
    examples: [{ says: "Stop a session's turns for now:", command: "ctxo sessions pause code-agent-auth" }]
  },
  {
    command: resumeSession,
    examples: [{ says: "Let it take turns again:", command: "ctxo sessions resume code-agent-auth" }]
  },
  {
    command: endSession,
    examples: [{ says: "End it for good:", command: "ctxo sessions end code-agent-auth" }]
  },
  {
    command: updateSession,
    examples: [
      {
        says: "Tag a session for filtered distributions, and drop a tag:",
        command: "ctxo sessions update notebook-physics --meta team=physics --unset draft"
      }
    ]
  }
]

export const sessionsExamples: ReadonlyArray<Example> = [
  {
    says: "The sessions of the example data and their states:",
    command: "ctxo sessions list --data fixtures/data"
  },
  {
    says: "Pause a session, then resume it:",
    command: "ctxo sessions pause code-agent-auth && ctxo sessions resume code-agent-auth"
  },
  {
    says: "Tag a session for filtered distributions:",
    command: "ctxo sessions update notebook-physics --meta team=physics"
  }
]

// --- ctxo tasks

const listTasks = Command.make("list", { data, json, session }, (args) =>
  Effect.gen(function* () {
    const controller = yield* Controller.Controller
    const tasks = yield* controller.tasks(args.session)
    yield* print(args.json, tasks, () =>
      tasks.length === 0 ? `${args.session} has no tasks` : tasks.map(taskLine).join("\n")
    )
  }).pipe(Effect.provide(controllerOn(args.data)))
).pipe(
  Command.withDescription("List a session's tasks, oldest first: id, status, title and where each came from.")
)

const title = Args.text({ name: "title" }).pipe(Args.withDescription("The task's title."))
const description = Options.text("description").pipe(
  Options.withAlias("d"),
  Options.withPseudoName("TEXT"),
  Options.withDescription("The task's description."),
  Options.optional
)

const addTask = Command.make("add", { data, json, session, description, title }, (args) =>
  Effect.gen(function* () {
    const controller = yield* Controller.Controller
    const task = yield* controller.addTask(args.session, {
      title: args.title,
      ...Option.match(args.description, { onNone: () => ({}), onSome: (d) => ({ description: d }) })
    })
    yield* print(args.json, task, () => `added ${task.id} to ${args.session}: ${task.title}`)
  }).pipe(Effect.provide(controllerOn(args.data)))
).pipe(Command.withDescription("Add a pending task to a session (a paused one too; not an ended one)."))

const status = Options.choice("status", TaskStatus.literals).pipe(
  Options.withPseudoName("STATUS"),
  Options.withDescription("The new status: pending, in_progress, done or cancelled."),
  Options.optional
)
const newTitle = Options.text("title").pipe(
  Options.withPseudoName("TEXT"),
  Options.withDescription("The new title."),
  Options.optional
)
const taskId = Args.text({ name: "task-id" }).pipe(
  Args.withDescription("The task's id (as `ctxo tasks list` shows it).")
)

const updateTask = Command.make(
  "update",
  { data, json, session, status, title: newTitle, description, taskId },
  (args) =>
    Effect.gen(function* () {
      const controller = yield* Controller.Controller
      const task = yield* controller.updateTask(args.session, args.taskId, {
        ...Option.match(args.status, { onNone: () => ({}), onSome: (s) => ({ status: s }) }),
        ...Option.match(args.title, { onNone: () => ({}), onSome: (t) => ({ title: t }) }),
        ...Option.match(args.description, { onNone: () => ({}), onSome: (d) => ({ description: d }) })
      })
      yield* print(args.json, task, () => taskLine(task))
    }).pipe(Effect.provide(controllerOn(args.data)))
).pipe(Command.withDescription("Change a task's status, title or description."))

const mode = Options.choice("mode", ["broadcast", "filtered"]).pipe(
  Options.withPseudoName("MODE"),
  Options.withDescription(
    "broadcast: to every listed session, or every session when none is listed; filtered: to those of them --filter and --concept select."
  )
)
const sessions = Options.text("sessions").pipe(
  Options.withPseudoName("A,B"),
  Options.withDescription("The sessions to consider, comma-separated (default: every session)."),
  Options.optional
)
const filter = Options.keyValueMap("filter").pipe(
  Options.withPseudoName("KEY=VALUE"),
  Options.withDescription(
    "filtered: a metadata pair every selected session has (repeat for more: all must match)."
  ),
  Options.optional
)
const conceptFilter = Options.text("concept").pipe(
  Options.withPseudoName("TEXT"),
  Options.withDescription("filtered: text the session's concept contains (case-insensitive)."),
  Options.optional
)
const from = Options.text("from").pipe(
  Options.withPseudoName("ID"),
  Options.withDescription(
    "The session the task comes from (kept in each task's origin; not a target unless listed)."
  ),
  Options.optional
)
const idempotencyKey = Options.text("idempotency-key").pipe(
  Options.withPseudoName("KEY"),
  Options.withDescription(
    "Run again with the same key: the same distribution is answered, no task is added twice."
  ),
  Options.optional
)

const resultLine = (r: DistributionResult) =>
  "taskId" in r
    ? `${r.session.padEnd(24)} ${r.taskId}`
    : `${r.session.padEnd(24)} skipped (${r.skipped}): ${r.message}`

const distribute = Command.make(
  "distribute",
  { data, json, mode, sessions, filter, concept: conceptFilter, from, description, idempotencyKey, title },
  (args) =>
    Effect.gen(function* () {
      const controller = yield* Controller.Controller
      const metadata = Option.map(args.filter, (m) => Object.fromEntries(m))
      const hasFilter = Option.isSome(metadata) || Option.isSome(args.concept)
      const out = yield* controller.distribute(
        {
          task: {
            title: args.title,
            ...Option.match(args.description, { onNone: () => ({}), onSome: (d) => ({ description: d }) })
          },
          mode: args.mode,
          ...Option.match(args.sessions, {
            onNone: () => ({}),
            onSome: (list) => ({
              sessions: list
                .split(",")
                .map((s) => s.trim())
                .filter((s) => s !== "")
            })
          }),
          ...(hasFilter
            ? {
                filter: {
                  ...Option.match(metadata, { onNone: () => ({}), onSome: (m) => ({ metadata: m }) }),
                  ...Option.match(args.concept, { onNone: () => ({}), onSome: (c) => ({ concept: c }) })
                }
              }
            : {}),
          ...Option.match(args.from, { onNone: () => ({}), onSome: (f) => ({ fromSession: f }) })
        },
        Option.match(args.idempotencyKey, { onNone: () => ({}), onSome: (k) => ({ idempotencyKey: k }) })
      )
      const added = out.results.filter((r) => "taskId" in r).length
      yield* print(args.json, out, () =>
        [
          `${out.distributionId}${out.replayed ? " (answered before, nothing added now)" : ""}: ${added} of ${out.results.length} sessions got the task`,
          ...out.results.map(resultLine)
        ].join("\n")
      )
    }).pipe(Effect.provide(controllerOn(args.data)))
).pipe(
  Command.withDescription(
    "Send one task to many sessions. Ended sessions are skipped (and said so), paused ones receive the task."
  )
)

export const tasksCommand = Command.make("tasks").pipe(
  Command.withDescription(
    "A session's tasks (list, add, update), and one task sent to many sessions (distribute)."
  ),
  Command.withSubcommands([listTasks, addTask, updateTask, distribute])
)

export const tasksSubcommands: ReadonlyArray<CommandHelp> = [
  {
    command: listTasks,
    examples: [{ says: "A session's tasks:", command: "ctxo tasks list -s notebook-physics" }]
  },
  {
    command: addTask,
    examples: [
      {
        says: "Add a task with a description:",
        command: "ctxo tasks add -s notebook-physics -d 'Section 2' 'Review chapter 2'"
      }
    ]
  },
  {
    command: updateTask,
    examples: [
      {
        says: "Mark a task done:",
        command: "ctxo tasks update -s notebook-physics t-m3x1-abc123 --status done"
      }
    ]
  },
  {
    command: distribute,
    examples: [
      {
        says: "Send a task to every session:",
        command: "ctxo tasks distribute --mode broadcast 'Write a status note'"
      },
      {
        says: "Only to the sessions tagged team=physics whose concept mentions quantum:",
        command:
          "ctxo tasks distribute --mode filtered --filter team=physics --concept quantum 'Check the units'"
      },
      {
        says: "Safe to run again (the same key answers the same distribution):",
        command:
          "ctxo tasks distribute --mode broadcast --sessions a,b --idempotency-key plan-7 'Review the plan'"
      }
    ]
  }
]

export const tasksExamples: ReadonlyArray<Example> = [
  {
    says: "Add a task to a session and list its tasks:",
    command: "ctxo tasks add -s notebook-physics 'Review chapter 2' && ctxo tasks list -s notebook-physics"
  },
  { says: "Mark it done:", command: "ctxo tasks update -s notebook-physics t-m3x1-abc123 --status done" },
  {
    says: "Send a task to every session:",
    command: "ctxo tasks distribute --mode broadcast 'Write a status note'"
  },
  {
    says: "Only to the physics sessions among two:",
    command:
      "ctxo tasks distribute --mode filtered --sessions notebook-physics,code-agent-auth --filter team=physics 'Check the units'"
  }
]
