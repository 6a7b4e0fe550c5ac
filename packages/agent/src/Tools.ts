/**
 * The agent's tools (design.md Gateway): shell-like, sandboxed to the session through the store.
 * Each returns the full observation `{ status, data?, error? }`; history keeps it compressed
 * (`recordToolResult`), the running step sees it whole.
 */

import { blockText, getBlockById } from "@ctxo/blocks/Block"
import { parseMarkdownBlocks } from "@ctxo/blocks/MarkdownBlocks"
import type { OfferedTool, ToolSpec } from "@ctxo/compiler/ToolSelection"
import { HistoryStore } from "@ctxo/history/HistoryStore"
import { dismissMemory } from "@ctxo/history/HistoryView"
import type { ReadTracker } from "@ctxo/history/ReadTracker"
import type { RawToolResult } from "@ctxo/history/ToolResultCompressor"
import { Store } from "@ctxo/store/Store"
import { Effect, Either } from "effect"
import type { RE2JS } from "re2js"

const SEARCH_CAP = 200
/** Files larger than this are skipped by `search`. */
const SEARCH_FILE_BYTES = 1_048_576
/** `search` stops after scanning this much (and says so). */
const SEARCH_TOTAL_BYTES = 8 * 1_048_576

/** The RE2 engine, loaded by the first search (not when a process starts). */
let re2: Promise<typeof import("re2js")> | undefined
const loadRe2 = () => (re2 ??= import("re2js"))

/**
 * A model-given pattern compiled for RE2 (linear time in the text, whatever the pattern), or the
 * reason it cannot be: RE2 has no backreferences and no lookaround.
 */
const compileSearchPattern = (
  { RE2JS, RE2JSException }: typeof import("re2js"),
  pattern: string
): Either.Either<RE2JS, string> => {
  try {
    return Either.right(RE2JS.compile(pattern))
  } catch (e) {
    const message = e instanceof RE2JSException ? e.message : String(e)
    const unsupported =
      /unsupported Perl syntax|invalid escape sequence: `\\[1-9]|invalid named capture: `\(\?<[=!]/.test(
        message
      )
    return Either.left(
      unsupported
        ? `this pattern needs backreferences or lookaround, which search does not support (it runs RE2, a linear-time engine): ${message}`
        : `bad pattern (RE2 syntax): ${message}`
    )
  }
}

const fn = (
  name: string,
  description: string,
  properties: Record<string, unknown>,
  required: Array<string>
): ToolSpec => ({
  type: "function",
  function: {
    name,
    description,
    parameters: { type: "object", properties, required, additionalProperties: false }
  }
})
const str = (description: string) => ({ type: "string", description })
const int = (description: string) => ({ type: "integer", minimum: 1, description })

/** OpenAI function definitions of the tools. */
export const toolDefinitions = [
  fn(
    "read_file",
    "Read a file of the session (optionally lines startLine..endLine).",
    {
      path: str("Path relative to the session"),
      startLine: int("First line (1-based)"),
      endLine: int("Last line")
    },
    ["path"]
  ),
  fn(
    "write_file",
    "Write a file of the session; with startLine/endLine, replace those lines only.",
    {
      path: str("Path relative to the session"),
      content: str("New content"),
      startLine: int("First line to replace"),
      endLine: int("Last line to replace")
    },
    ["path", "content"]
  ),
  fn(
    "list_files",
    "List the session's files (under dir when given).",
    { dir: str("A directory of the session") },
    []
  ),
  fn(
    "search",
    `Search the session's files, line by line, for a regular expression (at most ${SEARCH_CAP} matches; files over 1 MB are skipped).`,
    {
      pattern: str("A regular expression in RE2 syntax (no backreferences, no lookaround)"),
      path: str("Only files under this path")
    },
    ["pattern"]
  ),
  fn(
    "read_block",
    "Read one block (a heading and its section) of a Markdown file.",
    { file: str("Path relative to the session"), blockId: str("Heading path, e.g. Setup/Install") },
    ["file", "blockId"]
  ),
  fn(
    "dismiss_memory",
    "Replace an earlier tool result in your memory with a short summary (it stays on file).",
    { targetMessageId: str("The message id of the tool result"), summary: str("What to remember instead") },
    ["targetMessageId", "summary"]
  )
]

/**
 * The agent's tools as the compile offers them: the core file tools and `dismiss_memory` always
 * on, `read_block` on demand (when the input names it or is about a file's sections).
 */
export const agentTools: ReadonlyArray<OfferedTool> = toolDefinitions.map((spec) => ({
  spec,
  alwaysOn: spec.function.name !== "read_block"
}))

const obj = (value: unknown): Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {}
const fail = (message: string, code = "TOOL_ERROR"): RawToolResult => ({
  status: "error",
  error: { code, message }
})

/** Runs one tool call; failures become an error observation the model can read, never a crash. */
export const runTool = (
  sessionId: string,
  name: string,
  argumentsJson: string,
  tracker: ReadTracker,
  /** Whether the turn's manifest lets the model write the session's control files. */
  options: { readonly allowControlFiles: boolean } = { allowControlFiles: false }
) =>
  Effect.gen(function* () {
    const store = yield* Store
    let args: Record<string, unknown>
    try {
      args = obj(JSON.parse(argumentsJson === "" ? "{}" : argumentsJson))
    } catch {
      return fail(`arguments are not JSON: ${argumentsJson.slice(0, 200)}`, "BAD_ARGUMENTS")
    }
    const text = (key: string) => (typeof args[key] === "string" ? (args[key] as string) : undefined)
    const num = (key: string) => (typeof args[key] === "number" ? (args[key] as number) : undefined)
    const run: Effect.Effect<
      RawToolResult,
      { readonly message: string; readonly _tag: string },
      Store | HistoryStore
    > = (() => {
      switch (name) {
        case "read_file": {
          const path = text("path") ?? ""
          const startLine = num("startLine")
          const endLine = num("endLine")
          return Effect.map(
            store.readFile(sessionId, path, {
              ...(startLine ? { startLine } : {}),
              ...(endLine ? { endLine } : {})
            }),
            (f): RawToolResult => {
              const note = tracker.observe(f.path, f.modifiedAt)
              return {
                status: "success",
                data: {
                  file: f.path,
                  startLine: f.startLine,
                  totalLines: f.totalLines,
                  content: f.content,
                  mtime: f.modifiedAt,
                  ...(note ? { note } : {})
                }
              }
            }
          )
        }
        case "write_file": {
          const path = text("path") ?? ""
          const startLine = num("startLine")
          const endLine = num("endLine")
          return Effect.gen(function* () {
            const existed = yield* store.readFile(sessionId, path).pipe(
              Effect.as(true),
              Effect.catchTag("FileNotFound", () => Effect.succeed(false))
            )
            // The session's control files only when the turn's manifest lets the agent write them.
            const info = yield* store.writeFile(sessionId, path, text("content") ?? "", {
              actor: "model",
              allowControlFiles: options.allowControlFiles,
              ...(startLine ? { startLine } : {}),
              ...(endLine ? { endLine } : {})
            })
            return {
              status: "success",
              data: {
                file: info.path,
                created: !existed,
                overwritten: existed,
                content: text("content") ?? "",
                version: info.version
              }
            } satisfies RawToolResult
          })
        }
        case "list_files": {
          const dir = (text("dir") ?? "").replace(/^\.?\/?/, "").replace(/\/$/, "")
          return Effect.map(
            store.listFiles(sessionId),
            (files): RawToolResult => ({
              status: "success",
              data: {
                path: dir === "" ? "." : dir,
                entries: files
                  .filter((f) => dir === "" || f.path.startsWith(`${dir}/`))
                  .map((f) => ({ name: f.path, type: "file", size: f.size }))
              }
            })
          )
        }
        case "search": {
          const under = (text("path") ?? "").replace(/\/$/, "")
          return Effect.gen(function* () {
            const compiled = compileSearchPattern(yield* Effect.promise(loadRe2), text("pattern") ?? "")
            if (Either.isLeft(compiled)) return fail(compiled.left, "BAD_ARGUMENTS")
            const regex = compiled.right
            const matches: Array<{ file: string; line: number; text: string }> = []
            const skipped: Array<string> = []
            let total = 0
            let scanned = 0
            let truncated = false
            for (const f of yield* store.listFiles(sessionId)) {
              if (under !== "" && f.path !== under && !f.path.startsWith(`${under}/`)) continue
              if (f.path === "messages.json" || f.path.startsWith("tool-results/")) continue
              if (f.size > SEARCH_FILE_BYTES) {
                skipped.push(f.path)
                continue
              }
              if (scanned + f.size > SEARCH_TOTAL_BYTES) {
                truncated = true
                break
              }
              scanned += f.size
              const content = (yield* store.readFile(sessionId, f.path)).content
              for (const [i, line] of content.split("\n").entries()) {
                if (!regex.matcher(line).find()) continue
                total++
                if (matches.length < SEARCH_CAP)
                  matches.push({ file: f.path, line: i + 1, text: line.slice(0, 300) })
              }
              // Other requests run between files.
              yield* Effect.yieldNow()
            }
            return {
              status: "success",
              data: {
                pattern: text("pattern"),
                matches,
                totalMatches: total,
                capped: total > SEARCH_CAP,
                ...(skipped.length === 0 ? {} : { skippedLargeFiles: skipped }),
                ...(truncated ? { truncated: `stopped after scanning ${scanned} bytes` } : {})
              }
            } satisfies RawToolResult
          })
        }
        case "read_block": {
          const file = text("file") ?? ""
          const id = text("blockId") ?? ""
          return Effect.map(store.readFile(sessionId, file), (f): RawToolResult => {
            const block = getBlockById(parseMarkdownBlocks(f.content, f.path), id)
            return block === undefined
              ? fail(`${f.path} has no block ${id}`, "NO_BLOCK")
              : {
                  status: "success",
                  data: {
                    file: f.path,
                    block: block.id,
                    startLine: block.source.startLine,
                    content: blockText(f.content, block)
                  }
                }
          })
        }
        case "dismiss_memory": {
          const target = text("targetMessageId") ?? ""
          const summary = text("summary") ?? ""
          return Effect.flatMap(HistoryStore, (history) =>
            history.modify(sessionId, (doc) =>
              Either.match(dismissMemory(doc, target, summary), {
                onLeft: (e) => Effect.succeed([fail(e.message, "NO_MESSAGE"), doc] as const),
                onRight: (next) =>
                  Effect.succeed([
                    { status: "success", data: { dismissed: target } } satisfies RawToolResult,
                    next
                  ] as const)
              })
            )
          )
        }
        default:
          return Effect.succeed(fail(`no tool named ${name}`, "UNKNOWN_TOOL"))
      }
    })()
    return yield* run.pipe(Effect.catchAll((e) => Effect.succeed(fail(e.message, e._tag))))
  })
