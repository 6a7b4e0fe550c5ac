/**
 * Decode errors as one sentence a person can act on: the file, the JSON path and what was expected,
 * for example `s1/messages.json: messages[3].role: expected "user", "assistant", "tool" or "system",
 * got "bot"`. Never the schema itself, at most 120 characters of the offending value, and the whole
 * sentence at most 300 characters. Pure; every package that decodes a file uses it.
 */
import type { ParseResult } from "effect"
import { ParseResult as PR } from "effect"

export const MAX_SENTENCE = 300
export const MAX_VALUE = 120
const MAX_EXPECTED = 80

/** `messages[3].role`; the top level is `(root)`. */
export const jsonPath = (path: ReadonlyArray<PropertyKey>): string => {
  if (path.length === 0) return "(root)"
  let out = ""
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`
    else {
      const name = String(key)
      out += /^[A-Za-z_$][\w$-]*$/.test(name)
        ? `${out === "" ? "" : "."}${name}`
        : `[${JSON.stringify(name).slice(0, 40)}]`
    }
  }
  return out
}

/** A text cut to `max` characters, an ellipsis marking the cut. */
export const clip = (text: string, max: number): string =>
  text.length <= max ? text : `${text.slice(0, max - 1)}…`

/** A schema's own description, short: long object and array types are named by their kind. */
const shortExpected = (expected: string): string => {
  const text = expected.trim()
  if (text.length <= MAX_EXPECTED && !text.includes("{")) return text
  if (text.startsWith("{")) return "an object"
  if (text.startsWith("ReadonlyArray<") || text.startsWith("Array<")) return "an array"
  if (text.includes(" | ")) return "one of the allowed forms"
  return clip(text, MAX_EXPECTED)
}

const joinAlternatives = (items: ReadonlyArray<string>): string => {
  // An optional field given a wrong value: leaving it out is not what the writer meant.
  const given = items.filter((item) => item !== "undefined")
  const unique = [...new Set(given.length > 0 ? given : items)]
  if (unique.length <= 1) return unique[0] ?? ""
  return `${unique.slice(0, -1).join(", ")} or ${unique.at(-1)}`
}

export interface Problem {
  /** The JSON path of the first problem (`(root)` for the top level). */
  readonly path: string
  /** What was wrong there, without the file: `expected string, got 5`. */
  readonly problem: string
}

/** The first problem of a parse error (alternatives of a union at the same place merged). */
export const firstProblem = (error: ParseResult.ParseError): Problem => {
  const issues = PR.ArrayFormatter.formatErrorSync(error)
  const first = issues[0]
  if (first === undefined) return { path: "(root)", problem: "the value does not match" }
  const path = jsonPath(first.path)
  const here = issues.filter((i) => jsonPath(i.path) === path && i._tag === first._tag)
  if (first._tag === "Missing") return { path, problem: "a required field is missing" }
  if (first._tag === "Unexpected") return { path, problem: "this field is not allowed here" }
  const expected: Array<string> = []
  let actual: string | undefined
  for (const issue of here) {
    const match = /^Expected ([\s\S]*?), actual ([\s\S]*)$/.exec(issue.message)
    if (match === null) continue
    expected.push(shortExpected(match[1]!))
    actual ??= match[2]!
  }
  if (expected.length === 0) {
    // Not a type mismatch: a JSON syntax error, a refinement or a transformation's own message.
    const message = first.message.replace(/\s+/g, " ").trim()
    const isJson = first._tag === "Transformation" && /JSON|position|token/i.test(message)
    return {
      path,
      problem: isJson ? `not valid JSON (${clip(message, MAX_VALUE)})` : clip(message, MAX_VALUE)
    }
  }
  return {
    path,
    problem: `expected ${joinAlternatives(expected)}${actual === undefined ? "" : `, got ${clip(actual, MAX_VALUE)}`}`
  }
}

/** The first problem as `path: problem`, for an error that names its file itself. */
export const problemOf = (error: ParseResult.ParseError): string => {
  const { path, problem } = firstProblem(error)
  return `${path}: ${problem}`
}

/** A file name as a sentence shows it: its first 100 characters. */
export const clipFile = (file: string): string => clip(file, 100)

/**
 * A parse error as one readable sentence naming the file, the JSON path and what was expected,
 * at most 300 characters.
 */
export const describeParseError = (error: ParseResult.ParseError, file: string): string => {
  return clip(`${clipFile(file)}: ${problemOf(error)}`, MAX_SENTENCE)
}

/** Any sentence clipped to the limit (for messages assembled around a problem). */
export const clipSentence = (text: string): string => clip(text, MAX_SENTENCE)
