/**
 * Finds the code points on which gpt-tokenizer and tiktoken disagree (their pre-tokenizer regexes
 * classify characters with different Unicode versions). Prints them as ranges for
 * `src/internal/engines.ts`. Run under every Node version CI uses and merge the results:
 *   node --import tsx/esm scripts/unicode-scan.ts
 */
import { disagreeingCodePoints, toRanges } from "../test/unicodeScan.ts"

for (const encoding of ["o200k_base", "cl100k_base"] as const) {
  const started = Date.now()
  const found = disagreeingCodePoints(encoding)
  console.log(`${encoding} (${process.version}, ${Date.now() - started} ms): ${found.length} code points`)
  console.log(
    toRanges(found)
      .map(([a, b]) => `[0x${a.toString(16)}, 0x${b.toString(16)}]`)
      .join(", ")
  )
}
