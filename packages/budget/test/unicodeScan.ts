/**
 * Compares gpt-tokenizer with tiktoken on every assigned code point, in contexts that exercise
 * the pre-tokenizer's letter, number, whitespace and contraction classes. Code points are tested
 * in chunks (one count per chunk per engine) and a disagreeing chunk is bisected.
 */
import * as cl100k from "gpt-tokenizer/encoding/cl100k_base"
import * as o200k from "gpt-tokenizer/encoding/o200k_base"
import { get_encoding } from "tiktoken"

const ASSIGNED = /\p{Assigned}/u
const ordinary = { disallowedSpecial: new Set<string>() }
const contexts = (c: string) => `${c}'s a${c}${c} 1${c}\n${c} `

/** Code points the scan covers: assigned ones, every `stride`-th, optionally leaving some out. */
const codePoints = function* (stride: number, skip: (cp: number) => boolean) {
  let index = 0
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue
    if (!ASSIGNED.test(String.fromCodePoint(cp)) || skip(cp)) continue
    if (index++ % stride === 0) yield cp
  }
}

export const disagreeingCodePoints = (
  encoding: "o200k_base" | "cl100k_base",
  options: { readonly stride?: number; readonly skip?: (cp: number) => boolean } = {}
): Array<number> => {
  const reference = get_encoding(encoding)
  const fast = encoding === "o200k_base" ? o200k : cl100k
  try {
    const differs = (cps: ReadonlyArray<number>) => {
      const text = cps.map((cp) => contexts(String.fromCodePoint(cp))).join("")
      return reference.encode_ordinary(text).length !== fast.countTokens(text, ordinary)
    }
    const found: Array<number> = []
    const bisect = (cps: ReadonlyArray<number>) => {
      if (!differs(cps)) return
      if (cps.length === 1) {
        found.push(cps[0]!)
        return
      }
      const mid = cps.length >> 1
      bisect(cps.slice(0, mid))
      bisect(cps.slice(mid))
    }
    let chunk: Array<number> = []
    for (const cp of codePoints(options.stride ?? 1, options.skip ?? (() => false))) {
      chunk.push(cp)
      if (chunk.length === 64) {
        bisect(chunk)
        chunk = []
      }
    }
    bisect(chunk)
    return found
  } finally {
    reference.free()
  }
}

export const toRanges = (cps: ReadonlyArray<number>): Array<[number, number]> => {
  const ranges: Array<[number, number]> = []
  for (const cp of cps) {
    const last = ranges[ranges.length - 1]
    if (last !== undefined && last[1] === cp - 1) last[1] = cp
    else ranges.push([cp, cp])
  }
  return ranges
}
