/**
 * The exact default engine (gpt-tokenizer, with tiktoken for the characters they disagree on)
 * counts like tiktoken across Unicode. The full scan takes minutes (`scripts/unicode-scan.ts`);
 * here every 11th assigned code point is checked, plus every code point of the routed ranges.
 */
import { describe, expect, it } from "@effect/vitest"
import { get_encoding } from "tiktoken"
import { DISAGREEING, makeEngine } from "../src/internal/engines.ts"
import { disagreeingCodePoints } from "./unicodeScan.ts"

const inTable = (cp: number) => DISAGREEING.some(([a, b]) => cp >= a && cp <= b)

describe("Unicode agreement with tiktoken", () => {
  for (const encoding of ["o200k_base", "cl100k_base"] as const) {
    it(`${encoding}: no disagreement outside the routed ranges`, () => {
      expect(disagreeingCodePoints(encoding, { stride: 11, skip: inTable })).toEqual([])
    })

    it(`${encoding}: the routed ranges are counted by the reference`, () => {
      const engine = makeEngine("gpt-tokenizer", encoding)
      const reference = get_encoding(encoding)
      try {
        for (const [first, last] of DISAGREEING) {
          for (const cp of [first, Math.floor((first + last) / 2), last]) {
            const c = String.fromCodePoint(cp)
            const text = `${c}'s a${c}${c} 1${c}\n${c} `
            expect(engine.count(text)).toBe(reference.encode_ordinary(text).length)
          }
        }
      } finally {
        engine.dispose()
        reference.free()
      }
    })
  }
})
