/**
 * Summaries of archived history (seed 002 A5, C2, E2). A `Summarizer` turns the messages being
 * archived into the fixed template below. The "File System State" section is always filled
 * mechanically from the tool calls (what was written or edited), never left to the model.
 *
 * Layers: `layerOpenAI` / `layerOpenAIConfig` (a model call through the openai SDK against any
 * OpenAI-compatible base URL) and `layerDeterministic` (the template filled from the messages
 * alone: for tests, replay and offline runs).
 */
import { Config, Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import type OpenAI from "openai"
import type { Message } from "./Message.ts"
import { textOf, toolCallsOf, toolResultsOf } from "./Message.ts"

export class SummarizerError extends Schema.TaggedError<SummarizerError>("@ctxo/history/SummarizerError")(
  "SummarizerError",
  { reason: Schema.String }
) {
  override get message(): string {
    return `Summary generation failed: ${this.reason}`
  }
}

export interface SummaryRequest {
  readonly messages: ReadonlyArray<Message>
  readonly fromTurn: number
  readonly toTurn: number
  /** The session's model, used when no summary model is configured. */
  readonly model?: string
}

export interface Service {
  readonly summarize: (request: SummaryRequest) => Effect.Effect<string, SummarizerError>
}

export class Summarizer extends Context.Tag("@ctxo/history/Summarizer")<Summarizer, Service>() {}

export const FILE_SYSTEM_STATE_HEADING = "### 📂 File System State (Snapshot)"

export const SUMMARY_TEMPLATE = `## 📌 Archived Session Summary
*(Contains context from [Start Time] to [Cutoff Time])*

### 🎯 Objectives & Status
* **Original Goal**: [what the user first set out to do]

### 🏗️ Technical Context (Static)
* **Stack**: [languages, frameworks, versions]
* **Environment**: [OS, shell, key environment variables]

### ✅ Completed Milestones (The "Done" Pile)
* [✓] [completed task 1] - [result in brief]
* [✓] [completed task 2] - [result in brief]

### 🧠 Key Insights & Decisions (Persistent Memory)
* **Decisions**: [key technical choices, and approaches dropped]
* **Learnings**: [special configuration, API formats, pitfalls]
* **User Preferences**: [habits the user insisted on]

${FILE_SYSTEM_STATE_HEADING}
*(Modified files in this archive segment)*
* \`path/to/file\`: [what changed]`

export const SUMMARY_PROMPT = `You archive the older part of a conversation between a user and a coding agent.
Write a summary that fills exactly this template, in this order, with these headings:

${SUMMARY_TEMPLATE}

Rules:
- Summarize only what is in the transcript. It is old history: do not describe work in progress or next steps.
- Keep facts a later turn may need: decisions, file names, commands, versions, errors and their fixes, preferences.
- Leave the "File System State" section as one line "(filled in by the system)": it is generated from the tool calls.
- Answer with the filled template only.`

const WRITE_TOOLS = /^(write|write_?file|create_?file)$/i
const EDIT_TOOLS = /^(edit|multi_?edit|edit_?file|str_?replace.*|apply_?patch)$/i

const pathOf = (input: unknown): string | undefined => {
  if (typeof input !== "object" || input === null) return undefined
  const o = input as Record<string, unknown>
  const path = o.path ?? o.file ?? o.file_path ?? o.filePath
  return typeof path === "string" ? path : undefined
}

/** The "File System State" lines, from the write and edit calls that succeeded, in first-touch order. */
export const fileSystemState = (messages: ReadonlyArray<Message>): Array<string> => {
  const failed = new Set(
    messages.flatMap((m) =>
      toolResultsOf(m)
        .filter((r) => r.status === "error")
        .map((r) => r.callId)
    )
  )
  const files = new Map<string, { created: boolean; edits: number }>()
  for (const message of messages) {
    for (const call of toolCallsOf(message)) {
      if (failed.has(call.callId)) continue
      const path = pathOf(call.input)
      if (path === undefined) continue
      const entry = files.get(path) ?? { created: false, edits: 0 }
      if (WRITE_TOOLS.test(call.name)) entry.created = true
      else if (EDIT_TOOLS.test(call.name)) entry.edits += 1
      else continue
      files.set(path, entry)
    }
  }
  return [...files].map(([path, e]) => {
    const what = [
      e.created ? "written" : undefined,
      e.edits > 0 ? `edited (${e.edits} edit${e.edits === 1 ? "" : "s"})` : undefined
    ]
      .filter((x) => x !== undefined)
      .join(", then ")
    return `* \`${path}\`: ${what}.`
  })
}

/** Puts the mechanical File System State section into a summary, replacing whatever the model wrote there. */
export const withFileSystemState = (summary: string, messages: ReadonlyArray<Message>): string => {
  const lines = fileSystemState(messages)
  const section = [
    FILE_SYSTEM_STATE_HEADING,
    "*(Modified files in this archive segment)*",
    ...(lines.length > 0 ? lines : ["* (no files were written or edited)"])
  ].join("\n")
  const at = summary.indexOf(FILE_SYSTEM_STATE_HEADING)
  if (at === -1) return `${summary.trimEnd()}\n\n${section}`
  const rest = summary.slice(at + FILE_SYSTEM_STATE_HEADING.length)
  const next = rest.search(/\n#{1,3} /)
  return `${summary.slice(0, at)}${section}${next === -1 ? "" : rest.slice(next)}`
}

/** The archived messages as a transcript for the summary model. */
export const transcript = (messages: ReadonlyArray<Message>): string =>
  messages
    .map((m) => {
      const parts = m.parts.map((p) =>
        p._tag === "text"
          ? p.text
          : p._tag === "tool-call"
            ? `Action: ${p.name}[${JSON.stringify(p.input)}]`
            : JSON.stringify({ status: p.status, data: p.data, ...(p.error ? { error: p.error } : {}) })
      )
      return `[${m.role}${m.role === "tool" ? ` ${toolResultsOf(m)[0]?.name ?? ""}` : ""}] ${parts.join("\n")}`
    })
    .join("\n\n")

const range = (request: SummaryRequest) => {
  const times = request.messages.map((m) => m.meta.createdAt).filter((t) => t !== undefined)
  const from = times[0] ?? `turn ${request.fromTurn}`
  const to = times.at(-1) ?? `turn ${request.toTurn}`
  return `*(Contains context from ${from} to ${to})*`
}

/** The template filled from the messages alone: deterministic, no model call. */
export const deterministicSummary = (request: SummaryRequest): string => {
  const inputs = request.messages.filter((m) => m.meta.kind === "input").map(textOf)
  const finals = request.messages.filter((m) => m.meta.kind === "final")
  const firstLine = (text: string) =>
    (text.split("\n").find((l) => l.trim() !== "") ?? "").trim().slice(0, 100)
  const milestones = finals.map((m) => {
    const input = request.messages.find((x) => x.meta.turn === m.meta.turn && x.meta.kind === "input")
    return `* [✓] ${firstLine(input === undefined ? "" : textOf(input))} - ${firstLine(textOf(m))}`
  })
  const summary = [
    "## 📌 Archived Session Summary",
    range(request),
    "",
    "### 🎯 Objectives & Status",
    `* **Original Goal**: ${firstLine(inputs[0] ?? "(no user input in this segment)")}`,
    "",
    "### 🏗️ Technical Context (Static)",
    "* **Stack**: (not recorded)",
    "* **Environment**: (not recorded)",
    "",
    '### ✅ Completed Milestones (The "Done" Pile)',
    ...(milestones.length > 0 ? milestones : ["* (none finished in this segment)"]),
    "",
    "### 🧠 Key Insights & Decisions (Persistent Memory)",
    "* **Decisions**: (not recorded)",
    "* **Learnings**: (not recorded)",
    "* **User Preferences**: (not recorded)",
    ""
  ].join("\n")
  return withFileSystemState(summary, request.messages)
}

export const layerDeterministic: Layer.Layer<Summarizer> = Layer.succeed(Summarizer, {
  summarize: (request) => Effect.succeed(deterministicSummary(request))
})

export interface OpenAISummarizerOptions {
  readonly baseURL?: string
  readonly apiKey: Redacted.Redacted<string> | string
  /** Summary model; default: the session's model from the request. */
  readonly model?: string
  readonly maxRetries?: number
}

export const makeOpenAI = (options: OpenAISummarizerOptions): Service => {
  // The SDK is loaded by the first summary, not when the layer is built: a gateway's start does not
  // parse it.
  let client: Promise<OpenAI> | undefined
  const clientNow = () =>
    (client ??= import("openai").then(
      ({ default: OpenAI }) =>
        new OpenAI({
          apiKey: typeof options.apiKey === "string" ? options.apiKey : Redacted.value(options.apiKey),
          ...(options.baseURL === undefined ? {} : { baseURL: options.baseURL }),
          maxRetries: options.maxRetries ?? 2
        })
    ))
  return {
    summarize: (request) =>
      Effect.gen(function* () {
        const model = options.model ?? request.model
        if (model === undefined) return yield* new SummarizerError({ reason: "no summary model configured" })
        const completion = yield* Effect.tryPromise({
          try: (signal) =>
            clientNow().then((client) =>
              client.chat.completions.create(
                {
                  model,
                  messages: [
                    { role: "system", content: SUMMARY_PROMPT },
                    { role: "user", content: `${range(request)}\n\n${transcript(request.messages)}` }
                  ]
                },
                { signal }
              )
            ),
          catch: (error) =>
            new SummarizerError({ reason: error instanceof Error ? error.message : String(error) })
        })
        const text = completion.choices[0]?.message?.content
        if (typeof text !== "string" || text.trim() === "") {
          return yield* new SummarizerError({ reason: "the model returned no summary" })
        }
        return withFileSystemState(text.trim(), request.messages)
      }).pipe(Effect.withSpan("Summarizer.summarize"))
  }
}

export const layerOpenAI = (options: OpenAISummarizerOptions): Layer.Layer<Summarizer> =>
  Layer.sync(Summarizer, () => makeOpenAI(options))

/**
 * From configuration: `CTXO_SUMMARY_BASE_URL`, `CTXO_SUMMARY_API_KEY`, `CTXO_SUMMARY_MODEL`, each
 * falling back to `CTXO_UPSTREAM_BASE_URL`, `CTXO_UPSTREAM_API_KEY` and the session's model.
 */
export const layerOpenAIConfig: Layer.Layer<Summarizer, import("effect/ConfigError").ConfigError> =
  Layer.effect(
    Summarizer,
    Effect.gen(function* () {
      const baseURL = yield* Config.option(
        Config.string("CTXO_SUMMARY_BASE_URL").pipe(
          Config.orElse(() => Config.string("CTXO_UPSTREAM_BASE_URL"))
        )
      )
      const apiKey = yield* Config.redacted("CTXO_SUMMARY_API_KEY").pipe(
        Config.orElse(() => Config.redacted("CTXO_UPSTREAM_API_KEY"))
      )
      const model = yield* Config.option(Config.string("CTXO_SUMMARY_MODEL"))
      return makeOpenAI({
        apiKey,
        ...Option.match(baseURL, { onNone: () => ({}), onSome: (url) => ({ baseURL: url }) }),
        ...Option.match(model, { onNone: () => ({}), onSome: (m) => ({ model: m }) })
      })
    })
  )
