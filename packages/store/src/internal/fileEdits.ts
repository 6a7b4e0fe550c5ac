/**
 * The rules of the files API, the same for every store (on disk, in memory): who may write which
 * file, `If-Match` versions, line ranges to read and to replace. Pure: a store reads the current
 * text, asks these, and writes what they return.
 */
import { createHash } from "node:crypto"
import { Either } from "effect"
import { HISTORY_JOURNAL, isControlFile, isHistoryFile } from "../Paths.ts"
import { InvalidRange, PathRefused, VersionConflict } from "../StoreErrors.ts"

/** A version is the first 16 hex digits of the SHA-256 of the content. */
export const versionOf = (content: string): string =>
  createHash("sha256").update(content).digest("hex").slice(0, 16)

export const splitLines = (text: string): Array<string> => {
  const lines = text.split("\n")
  if (lines.length > 1 && lines.at(-1) === "") lines.pop()
  return lines
}

export interface EditOptions {
  readonly ifMatch?: string
  readonly startLine?: number
  readonly endLine?: number
  readonly actor?: "user" | "model"
  readonly allowControlFiles?: boolean
}

/** Why this writer may not write `clean`, if it may not. */
export const writeRefusal = (clean: string, options: EditOptions): PathRefused | undefined =>
  isHistoryFile(clean)
    ? new PathRefused({
        path: clean,
        reason:
          "messages.json, messages.journal and tool-results/ are written by the history recorder (chat), runs/ by the orchestrator (runs)"
      })
    : options.actor === "model" && isControlFile(clean) && options.allowControlFiles !== true
      ? new PathRefused({
          path: clean,
          reason:
            "the model's tools may not write the session's control files (allow it with agent.writeControlFiles in context-config.json)"
        })
      : undefined

/** Why `clean` may not be read by name: the history journal is read as part of messages.json. */
export const readRefusal = (clean: string): PathRefused | undefined =>
  clean === HISTORY_JOURNAL
    ? new PathRefused({
        path: clean,
        reason: "the history journal is part of messages.json: read messages.json"
      })
    : undefined

/** The version check of a write or a deletion ("" = the file must not exist). */
export const versionCheck = (
  clean: string,
  current: string | undefined,
  ifMatch: string | undefined
): VersionConflict | undefined => {
  if (ifMatch === undefined) return undefined
  const actual = current === undefined ? null : versionOf(current)
  return (ifMatch === "" ? null : ifMatch) === actual
    ? undefined
    : new VersionConflict({ path: clean, expected: ifMatch || "(none)", actual })
}

/** The file's next text: `content` whole, or lines startLine..endLine of `current` replaced by it. */
export const nextText = (
  clean: string,
  current: string | undefined,
  content: string,
  options: EditOptions
): Either.Either<string, PathRefused | VersionConflict | InvalidRange> => {
  const refused = writeRefusal(clean, options) ?? versionCheck(clean, current, options.ifMatch)
  if (refused !== undefined) return Either.left(refused)
  if (options.startLine === undefined && options.endLine === undefined) return Either.right(content)
  const lines = current === undefined ? [] : splitLines(current)
  const start = options.startLine ?? 1
  const end = options.endLine ?? lines.length
  if (start < 1 || start > lines.length + 1 || end < start - 1 || end > lines.length)
    return Either.left(
      new InvalidRange({ path: clean, reason: `lines ${start}-${end} are outside 1-${lines.length}` })
    )
  return Either.right(
    `${[...lines.slice(0, start - 1), ...splitLines(content), ...lines.slice(end)].join("\n")}\n`
  )
}

export interface ReadRange {
  readonly startLine?: number
  readonly endLine?: number
}

/** A file's content as the files API answers it: whole, or the lines asked for. */
export const contentOf = (
  clean: string,
  content: string,
  modifiedAt: string,
  range: ReadRange | undefined
): Either.Either<
  {
    readonly path: string
    readonly content: string
    readonly version: string
    readonly startLine: number
    readonly endLine: number
    readonly totalLines: number
    readonly modifiedAt: string
  },
  InvalidRange
> => {
  const lines = splitLines(content)
  const total = content === "" ? 0 : lines.length
  const version = versionOf(content)
  if (range === undefined || (range.startLine === undefined && range.endLine === undefined))
    return Either.right({
      path: clean,
      content,
      version,
      startLine: 1,
      endLine: total,
      totalLines: total,
      modifiedAt
    })
  const start = range.startLine ?? 1
  const end = Math.min(range.endLine ?? total, total)
  if (start < 1 || (range.endLine !== undefined && range.endLine < start) || start > Math.max(total, 1))
    return Either.left(
      new InvalidRange({
        path: clean,
        reason: `lines ${start}-${range.endLine ?? "end"} are outside 1-${total}`
      })
    )
  return Either.right({
    path: clean,
    content: lines.slice(start - 1, end).join("\n"),
    version,
    startLine: start,
    endLine: end,
    totalLines: total,
    modifiedAt
  })
}
