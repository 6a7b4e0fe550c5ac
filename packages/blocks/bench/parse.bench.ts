/**
 * Parse throughput on the real-world Markdown corpus, side by side in one run:
 *   ours:     parseMarkdownBlocks (headings, tree, ids, bodies, line ranges)
 *   baseline: markdown-it's block-level parse of the same text (commonmark preset, inline rules off)
 * Rounds alternate between the two so that both see the same machine state. Reports the median
 * MB/s of each and the ratio ours / baseline (target: >= 1.0, i.e. no slower than the baseline).
 */

import { performance } from "node:perf_hooks"
import MarkdownIt from "markdown-it"
import { parseMarkdownBlocks } from "../src/MarkdownBlocks.ts"
import { loadCorpus } from "./corpus.ts"

const corpus = loadCorpus()
const bytes = corpus.reduce((n, f) => n + Buffer.byteLength(f.content), 0)
const megabytes = bytes / (1024 * 1024)

const baselineParser = new MarkdownIt("commonmark")
baselineParser.core.ruler.disable("inline")

const candidates = {
  parseMarkdownBlocks: () => {
    let blocks = 0
    for (const file of corpus) blocks += parseMarkdownBlocks(file.content, file.path).length
    return blocks
  },
  "markdown-it block parse (baseline)": () => {
    let tokens = 0
    for (const file of corpus) tokens += baselineParser.parse(file.content, {}).length
    return tokens
  }
} as const
type Name = keyof typeof candidates

const WARMUP = 3
const ROUNDS = Number(process.env.CTXO_BENCH_ROUNDS ?? 15)
const samples: Record<Name, Array<number>> = {
  parseMarkdownBlocks: [],
  "markdown-it block parse (baseline)": []
}
const names = Object.keys(candidates) as Array<Name>

for (let round = 0; round < WARMUP + ROUNDS; round++) {
  const order = round % 2 === 0 ? names : [...names].reverse()
  for (const name of order) {
    const start = performance.now()
    candidates[name]()
    const seconds = (performance.now() - start) / 1000
    if (round >= WARMUP) samples[name].push(megabytes / seconds)
  }
}

const median = (values: Array<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}
const ours = median(samples.parseMarkdownBlocks)
const baseline = median(samples["markdown-it block parse (baseline)"])

console.log(
  `corpus: ${corpus.length} files, ${megabytes.toFixed(2)} MB; ${ROUNDS} rounds after ${WARMUP} warm-up`
)
for (const name of names)
  console.log(`${name.padEnd(36)} ${median(samples[name]).toFixed(1).padStart(7)} MB/s (median)`)
console.log(`ratio parseMarkdownBlocks / baseline: ${(ours / baseline).toFixed(2)}x (target >= 1.00)`)
