import { problemOf } from "@ctxo/store/DecodeError"
import type { ParseResult } from "effect"
import { Either } from "effect"

/** JSON text -> value, or why it is not JSON (the parser's own words, short). */
export const parseSnapshotText = (text: string): Either.Either<unknown, string> => {
  if (text.trim() === "") return Either.left("the text is empty")
  try {
    return Either.right(JSON.parse(text))
  } catch (error) {
    const detail = error instanceof Error ? error.message.replace(/\s+/g, " ").slice(0, 120) : String(error)
    return Either.left(`not valid JSON (${detail})`)
  }
}

/** A schema mismatch as `path: problem`. */
export const describeSchemaError = (error: ParseResult.ParseError): string => problemOf(error)

/** Float32 vector <-> base64 (little-endian), compact and exact for float32 values. */
export const encodeVector = (vector: ReadonlyArray<number>): string => {
  const bytes = Buffer.alloc(vector.length * 4)
  for (let i = 0; i < vector.length; i++) bytes.writeFloatLE(vector[i]!, i * 4)
  return bytes.toString("base64")
}

export const decodeVector = (text: string): Float32Array | undefined => {
  const bytes = Buffer.from(text, "base64")
  if (bytes.length % 4 !== 0 || bytes.toString("base64") !== text) return undefined
  const out = new Float32Array(bytes.length / 4)
  for (let i = 0; i < out.length; i++) out[i] = bytes.readFloatLE(i * 4)
  return out
}
