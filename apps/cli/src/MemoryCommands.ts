/**
 * `ctxo memory`: the memory levels of a data root (seed 003), through the same `Memory` the
 * gateway's `/api/sessions/:id/memory` and `/api/memory` call: list a level, pin, delete, and
 * persist L3 to L4 now. Readable output by default, `--json` for scripts.
 */
import * as Memory from "@ctxo/agent/Memory"
import * as Store from "@ctxo/store/Store"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Console, Data, Effect, Layer, Option } from "effect"
import type { CommandHelp, Example } from "./internal/help.ts"
import { dataOption } from "./internal/options.ts"

const data = dataOption(
  "The data root: sessions.json and one directory per session. Defaults to ./data, the live data root of the gateway (`pnpm start`); while a gateway serves it, prefer its HTTP API (the two processes do not share locks)."
)
const json = Options.boolean("json").pipe(
  Options.withDescription("Print the result as JSON instead of text.")
)
const session = Options.text("session").pipe(
  Options.withAlias("s"),
  Options.withPseudoName("ID"),
  Options.withDescription("The session (for L1 and L2)."),
  Options.optional
)
const level = Options.choice("level", ["L1", "L2", "L3", "L4"]).pipe(
  Options.withDescription(
    "L1: a session's newest turns; L2: its important turns; L3: agent-level, across sessions; L4: global, persistent."
  )
)
const expired = Options.boolean("expired").pipe(Options.withDescription("List expired entries too."))
const deleted = Options.boolean("deleted").pipe(Options.withDescription("List deleted entries too."))
const entry = Args.text({ name: "entry" }).pipe(
  Args.withDescription("The entry's id (`L2:<session>:t<turn>`, `L3:<hash>`); its prefix is its level.")
)

/** A command line that names no entry the command can act on (one sentence, exit 1). */
class MemoryUsage extends Data.TaggedError("MemoryUsage")<{ readonly message: string }> {}

const memoryOn = (root: string) => Memory.layer().pipe(Layer.provide(Store.layer(root)))

const line = (e: Memory.MemoryView) =>
  `${e.id.padEnd(28)} ${e.importance.toFixed(2)} ${e.pinned === true ? "pinned " : ""}${e.expired ? "expired " : ""}${e.deletedAt === undefined ? "" : "deleted "}from ${e.sources.map((s) => `${s.session}${s.turn === undefined ? "" : `#${s.turn}`}`).join(", ")}\n    ${e.text.split("\n").join("\n    ")}`

/** The level an id names, and the session L1 and L2 need. */
const target = (id: string, sessionId: Option.Option<string>) => {
  const l = (["L1", "L2", "L3", "L4"] as const).find((x) => id.startsWith(`${x}:`))
  if (l === undefined)
    return Effect.fail(
      new MemoryUsage({ message: `ctxo memory: ${id} is no memory entry id (it starts with L1: to L4:)` })
    )
  if ((l === "L1" || l === "L2") && Option.isNone(sessionId))
    return Effect.fail(
      new MemoryUsage({
        message: `ctxo memory: ${id} is a session's ${l} entry: name the session with --session`
      })
    )
  return Effect.succeed({ level: l, session: Option.getOrUndefined(sessionId) })
}

const list = Command.make("list", { data, json, session, level, expired, deleted }, (args) =>
  Effect.gen(function* () {
    const memory = yield* Memory.Memory
    const options = { includeExpired: args.expired, includeDeleted: args.deleted }
    const entries =
      args.level === "L1" || args.level === "L2"
        ? Option.isNone(args.session)
          ? yield* Effect.fail(
              new MemoryUsage({
                message: `ctxo memory list: --level ${args.level} is a session's level: name it with --session`
              })
            )
          : yield* memory.session(args.session.value, args.level, options)
        : yield* memory.global(args.level, options)
    yield* Console.log(
      args.json
        ? JSON.stringify({ level: args.level, entries }, null, 2)
        : entries.length === 0
          ? `no ${args.level} memory`
          : entries.map(line).join("\n")
    )
  }).pipe(Effect.provide(memoryOn(args.data)))
).pipe(
  Command.withDescription(
    "List a memory level: L1 or L2 of a session (--session), L3 or L4 of the data root."
  )
)

const pin = Command.make("pin", { data, json, session, entry, off: Options.boolean("unpin") }, (args) =>
  Effect.gen(function* () {
    const { level: l, session: sid } = yield* target(args.entry, args.session)
    const pinned = yield* (yield* Memory.Memory).pin(l, args.entry, !args.off, sid)
    yield* Console.log(
      args.json
        ? JSON.stringify(pinned, null, 2)
        : `${pinned.id} ${pinned.pinned === true ? "pinned" : "unpinned"}`
    )
  }).pipe(Effect.provide(memoryOn(args.data)))
).pipe(
  Command.withDescription(
    "Pin an entry (it never expires; a pinned L1 turn is promoted to L2), or unpin it with --unpin."
  )
)

const remove = Command.make("delete", { data, session, entry }, (args) =>
  Effect.gen(function* () {
    const { level: l, session: sid } = yield* target(args.entry, args.session)
    yield* (yield* Memory.Memory).remove(l, args.entry, sid)
    yield* Console.log(`${args.entry} deleted (hidden from views and sources; kept on file)`)
  }).pipe(Effect.provide(memoryOn(args.data)))
).pipe(Command.withDescription("Delete an entry: hidden from the views and the sources, kept on file."))

const persist = Command.make("persist", { data, json }, (args) =>
  Effect.gen(function* () {
    const written = yield* (yield* Memory.Memory).persist()
    yield* Console.log(
      args.json ? JSON.stringify(written, null, 2) : `${written.length} L3 entries persisted to L4`
    )
  }).pipe(Effect.provide(memoryOn(args.data)))
).pipe(
  Command.withDescription("Persist the data root's L3 memory to L4 now (the gateway does it on a timer).")
)

export const memoryCommand = Command.make("memory").pipe(
  Command.withDescription(
    "The memory levels: L1 (a session's newest turns), L2 (its important turns), L3 (across sessions), L4 (global, persistent); list, pin, delete, persist."
  ),
  Command.withSubcommands([list, pin, remove, persist])
)

export const memorySubcommands: ReadonlyArray<CommandHelp> = [
  {
    command: list,
    examples: [
      {
        says: "A session's important turns:",
        command: "ctxo memory list --session code-agent-auth --level L2"
      },
      { says: "The global memory:", command: "ctxo memory list --level L4 --json" }
    ]
  },
  {
    command: pin,
    examples: [
      {
        says: "Keep a turn in memory:",
        command: "ctxo memory pin L1:code-agent-auth:t2 --session code-agent-auth"
      }
    ]
  },
  {
    command: remove,
    examples: [{ says: "Hide an entry:", command: "ctxo memory delete L3:5f1c0e2a9b7d4c31" }]
  },
  { command: persist, examples: [{ says: "Persist L3 to L4 now:", command: "ctxo memory persist --json" }] }
]

export const memoryExamples: ReadonlyArray<Example> = [
  { says: "A session's important turns:", command: "ctxo memory list --session code-agent-auth --level L2" },
  { says: "Persist L3 to L4 now:", command: "ctxo memory persist" }
]
