/**
 * References (seed 000, 引用系统): line references `[guidance.md:12:30]` and block references
 * `[ground-truth.md#薛定谔方程]` / `[file.md#Parent/Child]`, inline in a query or explicit in the
 * manifest's `references[]`. Paths are sandboxed: relative, inside the session directory (or the
 * data root for global files), no `..`, no absolute paths, no NUL bytes, no encoded escapes.
 * A missing file, block, or a range outside the file is a `UnresolvedReference` naming the reference.
 */
import { blockText, toLines } from "@ctxo/blocks/Block"
import type { BlockIdSidecar } from "@ctxo/blocks/BlockIds"
import { resolveBlock } from "@ctxo/blocks/BlockResolver"
import { parseJsonBlocks } from "@ctxo/blocks/JsonBlocks"
import { parseMarkdownBlocks } from "@ctxo/blocks/MarkdownBlocks"
import { cleanPath } from "@ctxo/store/Paths"
import { Either } from "effect"
import { outsideSandbox, UnresolvedReference } from "./CompilerErrors.ts"
import type { Reference } from "./Manifest.ts"

export type ParsedReference =
  | {
      readonly _tag: "lines"
      readonly raw: string
      readonly path: string
      readonly startLine: number
      readonly endLine: number
    }
  | { readonly _tag: "block"; readonly raw: string; readonly path: string; readonly block: string }

// [path:12:30] or [path#Block/Path]; the path has no brackets, colons, # or line breaks.
const INLINE = /\[([^[\]\n:#]+?):(\d+):(\d+)\]|\[([^[\]\n:#]+?)#([^[\]\n]+)\]/g

/** The references written inline in a text, in order of appearance, duplicates removed. */
export const parseInlineReferences = (text: string): Array<ParsedReference> => {
  const seen = new Set<string>()
  const out: Array<ParsedReference> = []
  for (const match of text.matchAll(INLINE)) {
    const raw = match[0]
    if (seen.has(raw)) continue
    seen.add(raw)
    if (match[1] !== undefined) {
      out.push({
        _tag: "lines",
        raw,
        path: match[1].trim(),
        startLine: Number(match[2]),
        endLine: Number(match[3])
      })
    } else {
      out.push({ _tag: "block", raw, path: match[4]!.trim(), block: match[5]!.trim() })
    }
  }
  return out
}

/** A manifest reference in its parsed form. Strings use the inline syntax. */
export const parseReference = (ref: Reference): Either.Either<ParsedReference, UnresolvedReference> => {
  if (typeof ref !== "string") {
    return Either.right(
      "block" in ref
        ? { _tag: "block", raw: `[${ref.path}#${ref.block}]`, path: ref.path, block: ref.block }
        : {
            _tag: "lines",
            raw: `[${ref.path}:${ref.startLine}:${ref.endLine}]`,
            path: ref.path,
            startLine: ref.startLine,
            endLine: ref.endLine
          }
    )
  }
  const text = ref.trim().startsWith("[") ? ref.trim() : `[${ref.trim()}]`
  const parsed = parseInlineReferences(text)
  return parsed.length === 1 && parsed[0]!.raw === text
    ? Either.right(parsed[0]!)
    : Either.left(
        new UnresolvedReference({
          ref,
          kind: "invalid",
          reason: "not a reference: use [file:start:end] or [file#Block]"
        })
      )
}

/**
 * Checks a path written by a user or a model and gives it back normalized (`a/./b` -> `a/b`), by
 * the store's one path rule (`cleanPath`): refused are empty paths, absolute ones (`/x`, `C:\x`,
 * `\\server`), URLs, `~`, any `..` segment, NUL bytes, backslashes, percent-encoded text (`%2e%2e`,
 * `%2f`: paths are literal) and over-long paths or segments. A refusal is an `UnresolvedReference`
 * (`outside-sandbox`) naming `ref`, with the store's reason.
 */
export const sandboxPath = (path: string, ref = path): Either.Either<string, UnresolvedReference> =>
  Either.mapLeft(cleanPath(path), (refused) => outsideSandbox(ref, refused))

export interface ResolvedReference {
  readonly ref: string
  readonly path: string
  readonly startLine: number
  readonly endLine: number
  /** The block id when it was a block reference (after fuzzy resolution). */
  readonly block?: string
  readonly warning?: string
  readonly text: string
}

/**
 * Resolves a parsed reference against the content of its file (`undefined`: the file does not
 * exist). Blocks resolve through the blocks package: exact, renamed, or close, with a warning;
 * with the file's id sidecar, short ids (`^b3`) too.
 */
export const resolveReference = (
  ref: ParsedReference,
  content: string | undefined,
  sidecar?: BlockIdSidecar
): Either.Either<ResolvedReference, UnresolvedReference> => {
  if (content === undefined) {
    return Either.left(
      new UnresolvedReference({ ref: ref.raw, kind: "missing-file", reason: `${ref.path} does not exist` })
    )
  }
  if (ref._tag === "lines") {
    const total = toLines(content).length
    if (ref.startLine > ref.endLine || ref.endLine > total) {
      return Either.left(
        new UnresolvedReference({
          ref: ref.raw,
          kind: "out-of-range",
          reason: `lines ${ref.startLine}-${ref.endLine} are outside ${ref.path} (${total} line${total === 1 ? "" : "s"})`
        })
      )
    }
    const text = toLines(content)
      .slice(ref.startLine - 1, ref.endLine)
      .join("\n")
    return Either.right({
      ref: ref.raw,
      path: ref.path,
      startLine: ref.startLine,
      endLine: ref.endLine,
      text
    })
  }
  const parsed = ref.path.toLowerCase().endsWith(".json")
    ? parseJsonBlocks(content, ref.path).pipe(Either.getOrElse(() => []))
    : parseMarkdownBlocks(content, ref.path)
  return resolveBlock(parsed, ref.block, {
    file: ref.path,
    ...(sidecar === undefined ? {} : { sidecar })
  }).pipe(
    Either.mapLeft(
      (error) => new UnresolvedReference({ ref: ref.raw, kind: "missing-block", reason: error.message })
    ),
    Either.map((resolution) => ({
      ref: ref.raw,
      path: ref.path,
      startLine: resolution.block.source.startLine,
      endLine: resolution.block.source.endLine,
      block: resolution.block.id,
      ...(resolution.warning === undefined ? {} : { warning: resolution.warning }),
      text: ref.path.toLowerCase().endsWith(".json")
        ? resolution.block.content
        : blockText(content, resolution.block)
    }))
  )
}

/** How a resolved reference is put into the user's message. */
export const formatReference = (resolved: ResolvedReference): string =>
  `<reference ref="${resolved.ref}" path="${resolved.path}" lines="${resolved.startLine}-${resolved.endLine}">\n${resolved.text}\n</reference>`
