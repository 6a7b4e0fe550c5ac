/**
 * `ctxo --help` and `ctxo <command> --help`, rendered by ctxo instead of @effect/cli's built-in
 * help: the same command descriptions and option texts (taken from the commands' own help docs),
 * without the library's generic lines ("A user-defined piece of text.", "This setting is
 * optional."), with usage lines that start with `ctxo`, each command's examples, and colors only
 * on a terminal (never with NO_COLOR, never when the output is piped).
 */
import * as CliConfig from "@effect/cli/CliConfig"
import * as Command from "@effect/cli/Command"
import type * as HelpDoc from "@effect/cli/HelpDoc"
import type * as Span from "@effect/cli/HelpDoc/Span"
import * as Usage from "@effect/cli/Usage"

/** Whether to color what goes to a stream: a terminal, no NO_COLOR, not TERM=dumb (FORCE_COLOR wins). */
export const colorFor = (
  stream: { readonly isTTY?: boolean | undefined },
  env: Readonly<Record<string, string | undefined>> = process.env
): boolean => {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== "") return false
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== "" && env.FORCE_COLOR !== "0") return true
  return stream.isTTY === true && env.TERM !== "dumb"
}

/** ANSI SGR sequences (colors, bold): what @effect/cli's renderer adds. */
const SGR = /\u001b\[[0-9;]*m/g
export const stripAnsi = (text: string): string => text.replace(SGR, "")

export interface Example {
  /** The command line, starting with `ctxo`. */
  readonly command: string
  /** What it does (one line). */
  readonly says: string
}

export interface CommandHelp {
  // biome-ignore lint/suspicious/noExplicitAny: any command of the CLI
  readonly command: Command.Command<any, any, any, any>
  readonly examples: ReadonlyArray<Example>
  /** The subcommands of a command group (`ctxo tasks add`), each with its own help. */
  readonly subcommands?: ReadonlyArray<CommandHelp>
}

/** A command's name (`compile`, `tasks`, `add`). */
export const commandName = (help: CommandHelp): string => [...Command.getNames(help.command)][0] ?? ""

interface Style {
  readonly heading: (s: string) => string
  readonly name: (s: string) => string
  readonly dim: (s: string) => string
}
const styles = (color: boolean): Style =>
  color
    ? {
        heading: (s) => `\u001b[1m${s}\u001b[0m`,
        name: (s) => `\u001b[36m${s}\u001b[0m`,
        dim: (s) => `\u001b[2m${s}\u001b[0m`
      }
    : { heading: (s) => s, name: (s) => s, dim: (s) => s }

const spanText = (span: Span.Span): string => {
  switch (span._tag) {
    case "Sequence":
      return spanText(span.left) + spanText(span.right)
    case "Highlight":
    case "Strong":
    case "Weak":
      return spanText(span.value)
    case "Text":
    case "URI":
      return span.value
  }
}

const flatten = (doc: HelpDoc.HelpDoc): Array<HelpDoc.HelpDoc> =>
  doc._tag === "Sequence" ? [...flatten(doc.left), ...flatten(doc.right)] : doc._tag === "Empty" ? [] : [doc]

const paragraphs = (doc: HelpDoc.HelpDoc): Array<string> =>
  flatten(doc).flatMap((d) =>
    d._tag === "Paragraph"
      ? [spanText(d.value)]
      : d._tag === "Enumeration"
        ? d.elements.flatMap(paragraphs).map((p) => `- ${p}`)
        : []
  )

/** The library's generic lines about an option or argument (its type, optional, repeated, key=value forms). */
const FILLER =
  /^This (setting|argument|option) (is optional|may be repeated|must be repeated|is a property argument)|^- May be specified (a single time|multiple times)/

interface Entry {
  readonly label: string
  readonly text: ReadonlyArray<string>
}

/** Definitions of a description list: the label and the option's own description. */
const entries = (doc: HelpDoc.HelpDoc, kind: "options" | "arguments"): Array<Entry> =>
  flatten(doc).flatMap((d) =>
    d._tag === "DescriptionList"
      ? d.definitions.map(([span, body]) => {
          // The first paragraph is the type's generic description (the label already shows the type).
          const text = paragraphs(body)
            .slice(1)
            .filter((p) => !FILLER.test(p))
          let label = spanText(span)
          if (kind === "options" && label.startsWith("(") && label.endsWith(")")) label = label.slice(1, -1)
          if (kind === "arguments") {
            // `<file>`, `<file> 1+` or `<file>...`: written as the usage line writes it.
            const repeated = / \d+\+$|\.\.\.$/.test(label)
            label = `<${label.replace(/ \d+\+$|\.\.\.$/, "").replace(/^<|>$/g, "")}>${repeated ? "..." : ""}`
          }
          return { label, text }
        })
      : []
  )

/** Words wrapped to `width`, every line indented by `indent`. */
const wrap = (text: string, indent: number, width: number): Array<string> => {
  const out: Array<string> = []
  let line = ""
  for (const word of text.split(/\s+/).filter((w) => w !== "")) {
    if (line !== "" && indent + line.length + 1 + word.length > width) {
      out.push(" ".repeat(indent) + line)
      line = word
    } else line = line === "" ? word : `${line} ${word}`
  }
  if (line !== "") out.push(" ".repeat(indent) + line)
  return out
}

const usageConfig = CliConfig.make({ showAllNames: false, showBuiltIns: false })
const helpConfig = CliConfig.make({ showBuiltIns: false })

/** The sections of a command's help doc, by heading. */
const sections = (doc: HelpDoc.HelpDoc): Map<string, Array<HelpDoc.HelpDoc>> => {
  const out = new Map<string, Array<HelpDoc.HelpDoc>>()
  let current = ""
  for (const d of flatten(doc)) {
    if (d._tag === "Header") {
      current = spanText(d.value)
      out.set(current, [])
    } else out.get(current)?.push(d)
  }
  return out
}

const descriptionOf = (command: CommandHelp["command"]): string =>
  (sections(Command.getHelp(command, helpConfig)).get("DESCRIPTION") ?? []).flatMap(paragraphs).join(" ")

const exampleLines = (examples: ReadonlyArray<Example>, style: Style, width: number) =>
  examples.flatMap((e) => [...wrap(e.says, 2, width).map(style.dim), `  $ ${e.command}`, ""])

/** The global options, shared by every command (the library's built-ins). */
const GLOBAL: ReadonlyArray<Entry> = [
  { label: "-h, --help", text: ["Show this help; `ctxo <command> --help` shows a command's."] },
  { label: "--version", text: ["Print the version of ctxo."] },
  {
    label: "--log-level LEVEL",
    text: ["The least severe log messages printed: all, trace, debug, info, warning, error, fatal or none."]
  },
  { label: "--completions SHELL", text: ["Print a completion script for sh, bash, fish or zsh."] },
  { label: "--wizard", text: ["Build the command line interactively, one question per option."] }
]

const entryLines = (list: ReadonlyArray<Entry>, style: Style, width: number) =>
  list.flatMap((e) => [`  ${style.name(e.label)}`, ...e.text.flatMap((t) => wrap(t, 6, width))])

export interface RenderOptions {
  readonly color: boolean
  readonly width?: number
}

/** Names and descriptions, aligned: the COMMANDS section of a help. */
const commandLines = (commands: ReadonlyArray<CommandHelp>, style: Style, width: number) => {
  const names = commands.map(commandName)
  const pad = Math.max(...names.map((n) => n.length)) + 2
  return commands.flatMap((c, i) => {
    const [first = "", ...rest] = wrap(descriptionOf(c.command), 2 + pad, width).map((l) => l.trimStart())
    return [`  ${style.name(names[i]!.padEnd(pad))}${first}`, ...rest.map((l) => " ".repeat(2 + pad) + l)]
  })
}

/**
 * `ctxo <command> --help` (`program` is `ctxo`), or a subcommand's (`ctxo tasks add --help`,
 * `program` is `ctxo tasks`). A command group lists its subcommands' usage and descriptions.
 */
export const renderCommandHelp = (program: string, help: CommandHelp, options: RenderOptions): string => {
  const style = styles(options.color)
  const width = options.width ?? 80
  const parts = sections(Command.getHelp(help.command, helpConfig))
  const usage =
    help.subcommands === undefined
      ? Usage.enumerate(Command.getUsage(help.command), usageConfig).map(spanText)
      : help.subcommands.flatMap((sub) =>
          Usage.enumerate(Command.getUsage(sub.command), usageConfig).map(
            (u) => `${commandName(help)} ${spanText(u)}`
          )
        )
  const lines: Array<string> = [style.heading("USAGE")]
  for (const u of usage)
    lines.push(...wrap(`${program} ${u}`, 2, width).map((l, i) => (i === 0 ? l : `    ${l}`)))
  lines.push("", style.heading("DESCRIPTION"))
  for (const p of (parts.get("DESCRIPTION") ?? []).flatMap(paragraphs)) lines.push(...wrap(p, 2, width), "")
  if (help.subcommands !== undefined)
    lines.push(
      style.heading("COMMANDS"),
      ...commandLines(help.subcommands, style, width),
      "",
      ...wrap(`\`${program} ${commandName(help)} <command> --help\` shows a command's options.`, 2, width),
      ""
    )
  const args = (parts.get("ARGUMENTS") ?? []).flatMap((d) => entries(d, "arguments"))
  if (args.length > 0) lines.push(style.heading("ARGUMENTS"), ...entryLines(args, style, width), "")
  const opts = (parts.get("OPTIONS") ?? []).flatMap((d) => entries(d, "options"))
  if (opts.length > 0) lines.push(style.heading("OPTIONS"), ...entryLines(opts, style, width), "")
  lines.push(
    style.heading("GLOBAL OPTIONS"),
    ...wrap("-h, --help, --version, --log-level LEVEL (see `ctxo --help`)", 2, width),
    ""
  )
  if (help.examples.length > 0)
    lines.push(style.heading("EXAMPLES"), ...exampleLines(help.examples, style, width))
  return lines.join("\n").trimEnd()
}

/** `ctxo --help`. */
export const renderRootHelp = (
  program: { readonly name: string; readonly version: string; readonly description: string },
  commands: ReadonlyArray<CommandHelp>,
  examples: ReadonlyArray<Example>,
  options: RenderOptions
): string => {
  const style = styles(options.color)
  const width = options.width ?? 80
  const lines: Array<string> = [
    `${style.heading(program.name)} ${program.version}: ${program.description}`,
    "",
    style.heading("USAGE"),
    `  ${program.name} <command> [options]`,
    `  ${program.name} <command> --help`,
    "",
    style.heading("COMMANDS"),
    ...commandLines(commands, style, width)
  ]
  lines.push("", style.heading("GLOBAL OPTIONS"), ...entryLines(GLOBAL, style, width), "")
  if (examples.length > 0) lines.push(style.heading("EXAMPLES"), ...exampleLines(examples, style, width))
  return lines.join("\n").trimEnd()
}
