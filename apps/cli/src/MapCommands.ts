/**
 * `ctxo map`: a session's thinking map on a data root, through the same `@ctxo/compiler/MapContext`
 * the gateway's `/api/sessions/:id/map` endpoints call: show it, set it from a file (validated; a
 * map that does not hold together is refused naming the node and the field), and print one node's
 * context in its seven sections with their tokens. Readable output by default, `--json` for scripts.
 */
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import { nodeContext, readMap, writeMap } from "@ctxo/compiler/MapContext"
import type { NodeInfo } from "@ctxo/compiler/ThinkingMap"
import * as HistoryStore from "@ctxo/history/HistoryStore"
import * as Store from "@ctxo/store/Store"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as FileSystem from "@effect/platform/FileSystem"
import { Console, Effect, Layer, Option } from "effect"
import type { CommandHelp, Example } from "./internal/help.ts"
import { modelsFile, registryLayer } from "./internal/models.ts"
import { dataOption } from "./internal/options.ts"

const data = dataOption(
  "The data root: sessions.json and one directory per session. Defaults to ./data, the live data root of the gateway (`pnpm start`); pass --data fixtures/data for the example data. While a gateway serves the same directory, prefer its HTTP API for writes (the two processes do not share locks)."
)
const json = Options.boolean("json").pipe(
  Options.withDescription("Print the result as JSON instead of text.")
)
const session = Options.text("session").pipe(
  Options.withAlias("s"),
  Options.withPseudoName("ID"),
  Options.withDescription("The session whose map (map.json) this is.")
)
const node = Options.text("node").pipe(
  Options.withAlias("n"),
  Options.withPseudoName("NODE"),
  Options.withDescription("The node's id in the map.")
)
const model = Options.text("model").pipe(
  Options.withAlias("m"),
  Options.withPseudoName("MODEL"),
  Options.withDescription(
    "Count tokens for this model (default: the session manifest's, else openai/gpt-4o); its input budget sets the default budget."
  ),
  Options.optional
)
const budget = Options.integer("budget").pipe(
  Options.withPseudoName("TOKENS"),
  Options.withDescription(
    "Tokens for the seven sections (default: the knowledge share of the model's input budget, as a compile gives tree__context)."
  ),
  Options.optional
)
const ifMatch = Options.text("if-match").pipe(
  Options.withPseudoName("VERSION"),
  Options.withDescription(
    'Write only over this version of the map (as `ctxo map show --json` prints it); "" when it must not exist yet.'
  ),
  Options.optional
)
const file = Args.file({ name: "file", exists: "yes" }).pipe(
  Args.withDescription("A JSON file of the map (packages/compiler/map.schema.json).")
)

const storeOn = (root: string) => HistoryStore.layerStore.pipe(Layer.provideMerge(Store.layer(root)))

const nodeLine = (n: NodeInfo, depth: number) =>
  `${"  ".repeat(depth)}- ${n.title} [${n.id}]${n.status === undefined ? "" : ` (${n.status})`}${n.dependencies.length === 0 ? "" : `  needs ${n.dependencies.join(", ")}`}${n.conclusion === undefined ? "" : `\n${"  ".repeat(depth + 1)}  Conclusion: ${n.conclusion}`}`

/** The nodes as an outline: each root, its children below it, in the map's order. */
const outline = (nodes: ReadonlyArray<NodeInfo>): string => {
  const lines: Array<string> = []
  const walk = (parent: string | undefined, depth: number) => {
    for (const n of nodes)
      if (n.parent === parent) {
        lines.push(nodeLine(n, depth))
        walk(n.id, depth + 1)
      }
  }
  walk(undefined, 0)
  return lines.join("\n")
}

const show = Command.make("show", { data, json, session }, (args) =>
  Effect.gen(function* () {
    const { map, text, version } = yield* readMap(args.session)
    yield* Console.log(
      args.json
        ? JSON.stringify({ path: "map.json", version, map: JSON.parse(text) as unknown }, null, 2)
        : [
            `${map.info.title}  (map.json, version ${version})`,
            ...(map.info.coreQuestion === undefined ? [] : [`Core question: ${map.info.coreQuestion}`]),
            ...(map.info.finalGoal === undefined ? [] : [`Final goal: ${map.info.finalGoal}`]),
            "",
            outline(map.nodes)
          ].join("\n")
    )
  }).pipe(Effect.provide(storeOn(args.data)))
).pipe(
  Command.withDescription("Show a session's thinking map: its title, question, goal and nodes as an outline.")
)

const set = Command.make("set", { data, json, session, ifMatch, file }, (args) =>
  Effect.gen(function* () {
    const text = yield* (yield* FileSystem.FileSystem).readFileString(args.file)
    const written = yield* writeMap(args.session, text, Option.getOrUndefined(args.ifMatch))
    yield* Console.log(
      args.json
        ? JSON.stringify(written, null, 2)
        : `${args.session}/map.json written (version ${written.version})`
    )
  }).pipe(Effect.provide(storeOn(args.data)))
).pipe(
  Command.withDescription(
    "Set a session's thinking map from a JSON file, validated first: a duplicate id, an unknown parent or dependency or a cycle is refused, naming the node and the field."
  )
)

const context = Command.make(
  "context",
  { data, json, session, node, model, budget, models: modelsFile },
  (args) =>
    Effect.gen(function* () {
      const report = yield* nodeContext({
        sessionId: args.session,
        nodeId: args.node,
        ...(Option.isSome(args.model) ? { model: args.model.value } : {}),
        ...(Option.isSome(args.budget) ? { budget: args.budget.value } : {})
      })
      const { formatted } = report
      yield* Console.log(
        args.json
          ? JSON.stringify(
              {
                session: report.session,
                node: report.node,
                model: report.model,
                counting: report.counting,
                budget: formatted.budget,
                tokens: formatted.tokens,
                info: report.info,
                sections: formatted.sections,
                text: formatted.text
              },
              null,
              2
            )
          : [
              formatted.text,
              "",
              `# ${formatted.tokens} of ${formatted.budget} tokens (${report.model}, ${report.counting})`,
              ...formatted.sections.map(
                (s, i) =>
                  `#   ${i + 1}. ${s.title.padEnd(44)} ${String(s.tokens).padStart(6)} of ${String(s.budget).padStart(6)}  ${s.kept} of ${s.items} items${s.dropped === 0 ? "" : `, ${s.dropped} left out`}`
              )
            ].join("\n")
      )
    }).pipe(Effect.provide(Layer.mergeAll(storeOn(args.data), registryLayer(args.models), Tokenizer.layer())))
).pipe(
  Command.withDescription(
    "Print one node's context as an agent working on it gets it: seven sections (task background, map overview, current node task with the user context, ancestors, dependencies with their conclusions, children, the conversation about the node), each cut at whole items to its share of the budget, with their tokens."
  )
)

export const mapCommand = Command.make("map").pipe(
  Command.withDescription(
    "A session's thinking map (map.json): show it, set it from a file, print a node's context in seven sections with tokens."
  ),
  Command.withSubcommands([show, set, context])
)

export const mapSubcommands: ReadonlyArray<CommandHelp> = [
  {
    command: show,
    examples: [
      {
        says: "The example session's release plan:",
        command: "ctxo map show --data fixtures/data -s code-agent-auth"
      }
    ]
  },
  {
    command: set,
    examples: [
      { says: "Set a map (validated):", command: "ctxo map set --session my-session plan.json" },
      {
        says: "Only over the version you read:",
        command: "ctxo map set -s my-session --if-match 3f2a9c01d4e5b6a7 plan.json"
      }
    ]
  },
  {
    command: context,
    examples: [
      {
        says: "What an agent fixing the bug is shown, with tokens per section:",
        command: "ctxo map context --data fixtures/data -s code-agent-auth --node fix"
      },
      {
        says: "Under a small budget, as JSON:",
        command: "ctxo map context --data fixtures/data -s code-agent-auth -n fix --budget 120 --json"
      }
    ]
  }
]

export const mapExamples: ReadonlyArray<Example> = [
  { says: "A session's thinking map:", command: "ctxo map show --data fixtures/data -s code-agent-auth" },
  {
    says: "One node's context in seven sections:",
    command: "ctxo map context --data fixtures/data -s code-agent-auth --node fix"
  }
]
