/**
 * The pure halves of the collectors (seed 003 ContextSource): each turns file contents into one
 * `__context` text, or into units the budget can cut between. Reading the files is `Compile`'s
 * job (through the sandboxed `Workspace`); these functions only format.
 */
import type { Block } from "@ctxo/blocks/Block"
import { blockText } from "@ctxo/blocks/Block"
import type { BlockIdSidecar } from "@ctxo/blocks/BlockIds"
import { resolveBlock } from "@ctxo/blocks/BlockResolver"
import { parseMarkdownBlocks } from "@ctxo/blocks/MarkdownBlocks"
import { Either } from "effect"
import { UnresolvedReference } from "./CompilerErrors.ts"

/** A piece of a context the budget may keep or drop whole (a block, a file, a summary). */
export interface ContextUnit {
  readonly key: string
  readonly id: string
  readonly ref?: string
  readonly text: string
  /**
   * Where the unit goes among its key's kept units (document order), when the source hands them
   * to the budget in another order (most relevant first): relevance decides what is kept, not
   * where it stands, so the request's prefix stays the same while the same units are kept.
   */
  readonly position?: number
  /**
   * How much the source wants it kept when the final exact count must drop something (higher is
   * kept longer; default 0): a memory's importance, a skill called by name over a relevant one.
   */
  readonly priority?: number
}

/**
 * Stage 2 (select blocks): the profile blocks the manifest lists, each with its children. With the
 * file's id sidecar, short ids (`^b3`) and old names of renamed headings resolve too.
 */
export const selectProfileBlocks = (
  content: string,
  file: string,
  ids: ReadonlyArray<string>,
  sidecar?: BlockIdSidecar
): Either.Either<Array<ContextUnit>, UnresolvedReference> => {
  const blocks = parseMarkdownBlocks(content, file)
  const units: Array<ContextUnit> = []
  for (const id of ids) {
    const resolved = resolveBlock(blocks, id, { file, ...(sidecar === undefined ? {} : { sidecar }) })
    if (Either.isLeft(resolved)) {
      return Either.left(
        new UnresolvedReference({
          ref: `[${file}#${id}]`,
          kind: "missing-block",
          reason: resolved.left.message
        })
      )
    }
    const block = resolved.right.block
    units.push({
      key: "profile__context",
      id: `${file}#${block.id}`,
      ref: `[${file}#${block.id}]`,
      text: blockText(content, block)
    })
  }
  return Either.right(units)
}

/** `CODE_LAW.md` in any letter case, at the root of the workspace (seed 002 C5). */
export const findRulesFile = (files: ReadonlyArray<string>): string | undefined =>
  files.find((f) => !f.includes("/") && f.toLowerCase() === "code_law.md")

/** A todo recap from Markdown task lists (`- [ ]` / `- [x]`): progress and what is open, in order. */
export const todoRecap = (markdown: string, file: string): string | undefined => {
  const tasks = [...markdown.matchAll(/^\s*[-*+] \[([ xX])\] (.+)$/gm)].map((m) => ({
    done: m[1] !== " ",
    text: m[2]!.trim()
  }))
  if (tasks.length === 0) return undefined
  const open = tasks.filter((t) => !t.done)
  return [
    `Todo (${file}): ${tasks.length - open.length} of ${tasks.length} done.`,
    ...(open.length > 0 ? ["Open:", ...open.map((t) => `- [ ] ${t.text}`)] : ["All tasks are done."])
  ].join("\n")
}

/**
 * A file as knowledge units: Markdown by top-level block, anything else whole; one block when
 * `block` names it (a heading path or, with the sidecar, a short id).
 */
export const knowledgeUnits = (
  path: string,
  content: string,
  block?: string,
  sidecar?: BlockIdSidecar
): Either.Either<Array<ContextUnit>, UnresolvedReference> => {
  if (block !== undefined) {
    const blocks = parseMarkdownBlocks(content, path)
    const resolved = resolveBlock(blocks, block, {
      file: path,
      ...(sidecar === undefined ? {} : { sidecar })
    })
    if (Either.isLeft(resolved)) {
      return Either.left(
        new UnresolvedReference({
          ref: `[${path}#${block}]`,
          kind: "missing-block",
          reason: resolved.left.message
        })
      )
    }
    const b = resolved.right.block
    return Either.right([
      {
        key: "knowledge__context",
        id: `${path}#${b.id}`,
        ref: `[${path}#${b.id}]`,
        text: blockText(content, b)
      }
    ])
  }
  if (!/\.(md|markdown)$/i.test(path))
    return Either.right([{ key: "knowledge__context", id: path, ref: path, text: content }])
  const top: ReadonlyArray<Block> = parseMarkdownBlocks(content, path)
  if (top.length === 0) return Either.right([])
  return Either.right(
    top.map((b) => ({
      key: "knowledge__context",
      id: `${path}#${b.id}`,
      ref: `[${path}#${b.id}]`,
      text: blockText(content, b)
    }))
  )
}

/** A glob (`*` within a segment, `**` across segments, `?`) as a test on relative paths. */
export const globMatcher = (pattern: string): ((path: string) => boolean) => {
  let re = ""
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!
    if (c === "*" && pattern[i + 1] === "*") {
      re += pattern[i + 2] === "/" ? "(?:.*/)?" : ".*"
      i += pattern[i + 2] === "/" ? 2 : 1
    } else if (c === "*") re += "[^/]*"
    else if (c === "?") re += "[^/]"
    else re += c.replace(/[.+^${}()|[\]\\]/g, "\\$&")
  }
  const regex = new RegExp(`^${re}$`)
  return (path) => regex.test(path)
}

export const isGlob = (path: string) => /[*?]/.test(path)
