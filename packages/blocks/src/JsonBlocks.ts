/**
 * JSON -> block tree by key path: `{"a":{"b":[1,2]}}` gives `a`, `a/b`, `a/b/0`, `a/b/1`.
 * Array elements are keyed by index. Keys are escaped like Markdown headings (`/` -> `\/`), and a
 * duplicated key gets `~2`. A block's content is the source text of its value.
 */
import { Either } from "effect"
import * as Jsonc from "jsonc-parser"
import type { Block } from "./Block.ts"
import { joinId, uniqueSegments } from "./Block.ts"
import { InvalidJson } from "./BlockErrors.ts"

const lineStarts = (text: string): Array<number> => {
  const starts = [0]
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) starts.push(i + 1)
  return starts
}

/** 0-based line of an offset (binary search over line starts). */
const lineOf = (starts: ReadonlyArray<number>, offset: number): number => {
  let lo = 0
  let hi = starts.length - 1
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1
    if (starts[mid]! <= offset) lo = mid
    else hi = mid - 1
  }
  return lo
}

const position = (starts: ReadonlyArray<number>, offset: number) => {
  const line = lineOf(starts, offset)
  return { line: line + 1, column: offset - starts[line]! + 1 }
}

// Node 20 says "at position N", Node 22+ "(line L column C)".
const jsonParseOffset = (text: string, message: string): number => {
  const byPosition = /position (\d+)/.exec(message)
  if (byPosition) return Number(byPosition[1])
  const byLine = /line (\d+) column (\d+)/.exec(message)
  if (byLine) return (lineStarts(text)[Number(byLine[1]) - 1] ?? 0) + Number(byLine[2]) - 1
  return text.length
}

/**
 * Parses strict JSON (no comments, no trailing commas) into blocks by key path. Invalid JSON is an
 * `InvalidJson` error naming the file, line and column; it never throws.
 */
export const parseJsonBlocks = (
  content: string,
  filePath: string
): Either.Either<Array<Block>, InvalidJson> => {
  const text = content.indexOf("\r") === -1 ? content : content.replace(/\r\n?/g, "\n")
  const starts = lineStarts(text)
  const errors: Array<Jsonc.ParseError> = []
  const root = Jsonc.parseTree(text, errors, { disallowComments: true, allowTrailingComma: false })
  const fail = (offset: number, reason: string) =>
    Either.left(
      new InvalidJson({ file: filePath, ...position(starts, Math.min(offset, text.length)), reason })
    )
  const first = errors[0]
  if (first !== undefined) return fail(first.offset, Jsonc.printParseErrorCode(first.error))
  // The tolerant scanner accepts a few things JSON does not (e.g. some number forms): JSON.parse decides.
  try {
    JSON.parse(text)
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e)
    return fail(jsonParseOffset(text, message), message)
  }
  if (root === undefined) return fail(0, "ValueExpected")

  const build = (node: Jsonc.Node, parentId: string | undefined, depth: number): Array<Block> => {
    const entries: Array<{ key: string; start: number; value: Jsonc.Node }> = []
    if (node.type === "object") {
      for (const property of node.children ?? []) {
        const [key, value] = property.children ?? []
        if (key === undefined || value === undefined) continue
        entries.push({ key: String(key.value), start: property.offset, value })
      }
    } else if (node.type === "array") {
      ;(node.children ?? []).forEach((value, index) => {
        entries.push({ key: String(index), start: value.offset, value })
      })
    }
    const segments = uniqueSegments(entries.map((e) => e.key))
    return entries.map((entry, i) => {
      const id = joinId(parentId, segments[i]!)
      const { value } = entry
      return {
        id,
        heading: entry.key,
        level: depth,
        content: text.slice(value.offset, value.offset + value.length),
        children: build(value, id, depth + 1),
        source: {
          file: filePath,
          startLine: lineOf(starts, entry.start) + 1,
          endLine: lineOf(starts, value.offset + Math.max(value.length - 1, 0)) + 1
        }
      }
    })
  }
  return Either.right(build(root, undefined, 1))
}
