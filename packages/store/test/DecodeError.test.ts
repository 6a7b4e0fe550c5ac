import { describe, expect, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import { describeParseError } from "../src/DecodeError.ts"

const Doc = Schema.Struct({
  format: Schema.Literal("x/v1"),
  items: Schema.Array(
    Schema.Struct({
      role: Schema.Literal("user", "assistant", "tool", "system"),
      text: Schema.String,
      meta: Schema.Struct({ turn: Schema.Int, tags: Schema.optional(Schema.Array(Schema.String)) })
    })
  )
})
const sentence = (value: unknown, file = "s1/messages.json") =>
  Either.match(Schema.decodeUnknownEither(Doc, { errors: "all" })(value), {
    onLeft: (error) => describeParseError(error, file),
    onRight: () => "(decoded)"
  })
const ok = { role: "user", text: "hi", meta: { turn: 1 } }

describe("describeParseError", () => {
  it("names the file, the JSON path and what was expected, in one sentence", () => {
    expect(sentence({ format: "x/v1", items: [ok, { ...ok, role: "bot" }] })).toBe(
      's1/messages.json: items[1].role: expected "user", "assistant", "tool" or "system", got "bot"'
    )
    expect(sentence({ format: "x/v1", items: [{ ...ok, meta: {} }] })).toBe(
      "s1/messages.json: items[0].meta.turn: a required field is missing"
    )
    expect(sentence({ format: "x/v1", items: [{ ...ok, text: 5 }] })).toBe(
      "s1/messages.json: items[0].text: expected string, got 5"
    )
  })

  it("never dumps the schema: a whole wrong document says what kind of value was expected", () => {
    const text = sentence([1, 2, 3])
    expect(text).toBe("s1/messages.json: (root): expected an object, got [1,2,3]")
    expect(text).not.toContain("readonly")
  })

  it("echoes at most 120 characters of an oversized value and stays under 300 characters", () => {
    const huge = "x".repeat(50_000)
    const text = sentence({ format: "x/v1", items: [{ ...ok, text: { huge } }] })
    expect(text.length).toBeLessThanOrEqual(300)
    expect(text).toMatch(/^s1\/messages\.json: items\[0\]\.text: expected string, got \{"huge":"x+…$/)
    expect(text.match(/x+/g)!.reduce((n, run) => Math.max(n, run.length), 0)).toBeLessThanOrEqual(120)
    const longFile = sentence({ format: huge }, `${"dir/".repeat(200)}messages.json`)
    expect(longFile.length).toBeLessThanOrEqual(300)
    expect(longFile).toContain('format: expected "x/v1", got')
  })

  it("says that a text is not JSON", () => {
    const error = Either.flip(Schema.decodeUnknownEither(Schema.parseJson(Doc))("{oops")).pipe(
      Either.getOrThrow
    )
    expect(describeParseError(error, "c.json")).toMatch(/^c\.json: \(root\): not valid JSON \(.+\)$/)
  })
})
