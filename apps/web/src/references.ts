/**
 * What the chat's autocomplete offers at the caret: `@file` mentions (the compiler's mention rule: an
 * `@` not after a letter or digit) and inline references, `[file`, then `[file:12:30]` (a block's
 * lines) or `[file#Heading/Sub]` (the block by its id) once the file is known.
 */
import type { BlockNode } from "@ctxo/api/Api"

export interface Token {
  readonly kind: "mention" | "reference"
  /** Where the token starts (its `@` or `[`). */
  readonly start: number
  /** What was typed after the `@` or `[`. */
  readonly typed: string
}

export interface Suggestion {
  /** Replaces the token. */
  readonly insert: string
  readonly label: string
  readonly detail?: string
  /** A file chosen inside a reference: its blocks come next. */
  readonly continues?: boolean
}

export const tokenAt = (text: string, caret: number): Token | undefined => {
  const before = text.slice(0, caret)
  const mention = /(^|[^A-Za-z0-9])@([A-Za-z0-9/._-]*)$/.exec(before)
  if (mention !== null) return { kind: "mention", start: caret - mention[2]!.length - 1, typed: mention[2]! }
  const reference = /\[([^\]\s[]*)$/.exec(before)
  if (reference !== null)
    return { kind: "reference", start: caret - reference[1]!.length - 1, typed: reference[1]! }
  return undefined
}

const flatten = (blocks: ReadonlyArray<BlockNode>): Array<BlockNode> =>
  blocks.flatMap((b) => [b, ...flatten(b.children)])

const blockFile = (path: string) => /\.(md|markdown|json)$/i.test(path)

/**
 * The suggestions for a token; `blocksOf(path)` gives a file's blocks when they are loaded (else
 * undefined: the caller loads them and asks again).
 */
export const suggestionsFor = (
  token: Token,
  files: ReadonlyArray<string>,
  blocksOf: (path: string) => ReadonlyArray<BlockNode> | undefined,
  limit = 12
): { readonly suggestions: ReadonlyArray<Suggestion>; readonly needsBlocks?: string } => {
  const typed = token.typed.toLowerCase()
  if (token.kind === "mention")
    return {
      suggestions: files
        .filter((f) => f.toLowerCase().includes(typed))
        .slice(0, limit)
        .map((f) => ({
          insert: `@${f} `,
          label: `@${f}`,
          detail: "mention: the model is told about the file"
        }))
    }
  const known = files.find((f) => token.typed.startsWith(`${f}:`) || token.typed.startsWith(`${f}#`))
  if (known === undefined)
    return {
      suggestions: files
        .filter((f) => f.toLowerCase().includes(typed))
        .slice(0, limit)
        .map((f) =>
          blockFile(f)
            ? { insert: `[${f}:`, label: `[${f}`, detail: "then a block or its lines", continues: true }
            : { insert: `[${f}:`, label: `[${f}:start:end]`, detail: "type the lines" }
        )
    }
  if (!blockFile(known)) return { suggestions: [] }
  const blocks = blocksOf(known)
  if (blocks === undefined) return { suggestions: [], needsBlocks: known }
  const rest = token.typed.slice(known.length + 1).toLowerCase()
  return {
    suggestions: flatten(blocks)
      .filter((b) => b.id.toLowerCase().includes(rest) || `${b.startLine}:${b.endLine}`.startsWith(rest))
      .slice(0, limit)
      .flatMap((b) => [
        {
          insert: `[${known}:${b.startLine}:${b.endLine}] `,
          label: `[${known}:${b.startLine}:${b.endLine}]`,
          detail: `lines of ${b.id}`
        },
        {
          insert: `[${known}#${b.id}] `,
          label: `[${known}#${b.id}]`,
          detail: "the block by its heading path"
        }
      ])
  }
}

/** After choosing a file for a reference, the blocks of that file: the token as it now reads. */
export const accept = (text: string, token: Token, caret: number, suggestion: Suggestion) => {
  const next = text.slice(0, token.start) + suggestion.insert + text.slice(caret)
  return { text: next, caret: token.start + suggestion.insert.length }
}
