/**
 * Exact BPE engines for one encoding. Both count user content as ordinary text: a special-token
 * string such as `<|endoftext|>` inside a file is counted as the characters it is, never rejected.
 *
 * - `gpt-tokenizer` (pure JS, the default: fastest in `pnpm bench`). Its pre-tokenizer is a
 *   JavaScript regular expression, so it sees letters and numbers with the JS engine's Unicode
 *   version, newer than tiktoken's: on characters added in Unicode 16 and 17, on U+FEFF and on
 *   U+0085 the two split text differently. Text containing any of those (`DISAGREEING`, found by
 *   `scripts/unicode-scan.ts` under Node 20 and 24) is counted by tiktoken, created the first
 *   time it is needed; everything else by gpt-tokenizer, with counts equal to tiktoken's.
 * - `tiktoken` (OpenAI's Rust core in WASM, the reference): ~64 MB per encoder that is only given
 *   back by `free()`, called when the owning layer's scope closes.
 */
import { createRequire } from "node:module"
import type { Tiktoken } from "tiktoken"
import type { Encoding } from "../ModelRegistry.ts"

export type EngineName = "gpt-tokenizer" | "tiktoken"

/** Code point ranges (inclusive) where gpt-tokenizer and tiktoken disagree, both encodings. */
export const DISAGREEING: ReadonlyArray<readonly [number, number]> = [
  [0x85, 0x85],
  [0x88f, 0x88f],
  [0xc5c, 0xc5c],
  [0xcdc, 0xcdc],
  [0x1acf, 0x1add],
  [0x1ae0, 0x1aeb],
  [0xa7ce, 0xa7cf],
  [0xa7d2, 0xa7d2],
  [0xa7d4, 0xa7d4],
  [0xa7f1, 0xa7f1],
  [0xfeff, 0xfeff],
  [0x10940, 0x10959],
  [0x10ec5, 0x10ec7],
  [0x10efa, 0x10efb],
  [0x11b60, 0x11b67],
  [0x11db0, 0x11ddb],
  [0x11de0, 0x11de9],
  [0x16ea0, 0x16eb8],
  [0x16ebb, 0x16ed3],
  [0x16ff2, 0x16ff6],
  [0x187f8, 0x187ff],
  [0x18d09, 0x18d1e],
  [0x18d80, 0x18df2],
  [0x1e6c0, 0x1e6de],
  [0x1e6e0, 0x1e6f5],
  [0x1e6fe, 0x1e6ff],
  [0x2b73a, 0x2b73f],
  [0x2cea2, 0x2cead],
  [0x323b0, 0x33479]
]

const hex = (cp: number) => `\\u{${cp.toString(16)}}`
const NEEDS_REFERENCE = new RegExp(
  `[${DISAGREEING.map(([a, b]) => (a === b ? hex(a) : `${hex(a)}-${hex(b)}`)).join("")}]`,
  "u"
)

export interface Engine {
  readonly encoding: Encoding
  readonly count: (text: string) => number
  readonly dispose: () => void
}

const require = createRequire(import.meta.url)

const tiktokenEncoder = (encoding: Encoding): Tiktoken =>
  (require("tiktoken") as typeof import("tiktoken")).get_encoding(encoding)

interface GptTokenizerModule {
  countTokens(text: string, options: { disallowedSpecial: Set<string> }): number
  clearMergeCache(): void
}

const gptTokenizerModule = (encoding: Encoding): GptTokenizerModule =>
  encoding === "o200k_base"
    ? (require("gpt-tokenizer/encoding/o200k_base") as GptTokenizerModule)
    : (require("gpt-tokenizer/encoding/cl100k_base") as GptTokenizerModule)

export const makeEngine = (name: EngineName, encoding: Encoding): Engine => {
  let reference: Tiktoken | undefined
  const referenceCount = (text: string) => {
    reference ??= tiktokenEncoder(encoding)
    return reference.encode_ordinary(text).length
  }
  const dispose = () => {
    reference?.free()
    reference = undefined
  }
  if (name === "tiktoken") return { encoding, count: referenceCount, dispose }

  const module = gptTokenizerModule(encoding)
  const ordinary = { disallowedSpecial: new Set<string>() }
  return {
    encoding,
    count: (text) => (NEEDS_REFERENCE.test(text) ? referenceCount(text) : module.countTokens(text, ordinary)),
    dispose: () => {
      module.clearMergeCache()
      dispose()
    }
  }
}
