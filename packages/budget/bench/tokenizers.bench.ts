/**
 * Token counting benchmarks, each side by side in one run, reported as ratios:
 *
 * 1. Engines on the mixed corpus (English, Chinese, code, JSON), o200k_base, one document at a
 *    time: tiktoken (reference) vs js-tiktoken vs gpt-tokenizer, MB/s and count agreement. The
 *    package's default engine is gpt-tokenizer routed to tiktoken for the characters they split
 *    differently; its counts must equal tiktoken's on every document.
 * 2. A 2,000-message history counted cold (fresh cache) vs warm (recompiling the same session).
 *    Target: warm at least 50x faster.
 * 3. The package's counting overhead (`Counter.count`, cache off) over the raw encoder on the
 *    same documents. Target: at most 10%.
 */

import { createRequire } from "node:module"
import { performance } from "node:perf_hooks"
import { Effect, Either } from "effect"
import { Tiktoken as JsTiktoken } from "js-tiktoken/lite"
import o200kRanks from "js-tiktoken/ranks/o200k_base"
import { get_encoding } from "tiktoken"
import type { ChatMessage } from "../src/ChatFormat.ts"
import * as ModelRegistry from "../src/ModelRegistry.ts"
import * as Tokenizer from "../src/Tokenizer.ts"
import { loadMixedCorpus } from "./corpus.ts"

// The same module instance the package loads, so clearing its merge cache between rounds is fair.
const gptO200k = createRequire(import.meta.url)("gpt-tokenizer/encoding/o200k_base") as {
  countTokens(text: string, options: { disallowedSpecial: Set<string> }): number
  clearMergeCache(): void
}

const rounds = Number(process.env.CTXO_BENCH_ROUNDS ?? 5)
const corpus = loadMixedCorpus()
const megabytes = corpus.reduce((n, d) => n + Buffer.byteLength(d.text), 0) / (1024 * 1024)
const byKind = ["english", "chinese", "code", "json"].map((kind) => {
  const docs = corpus.filter((d) => d.kind === kind)
  return `${kind} ${(docs.reduce((n, d) => n + Buffer.byteLength(d.text), 0) / 1024).toFixed(0)} KB`
})
console.log(
  `mixed corpus: ${corpus.length} documents, ${megabytes.toFixed(2)} MB (${byKind.join(", ")}); ${rounds} rounds`
)

const median = (values: ReadonlyArray<number>) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
const time = (f: () => void) => {
  const start = performance.now()
  f()
  return (performance.now() - start) / 1000
}

const registry = Either.getOrThrow(ModelRegistry.make())
const gpt4o = Effect.runSync(registry.resolve("gpt-4o"))
const ordinary = { disallowedSpecial: new Set<string>() }

// --- 1. engines
const tiktoken = get_encoding("o200k_base")
const jsTiktoken = new JsTiktoken(o200kRanks)
const packageDefault = Tokenizer.makeUnsafe({ cacheCapacity: 0 })
const packageCounter = Effect.runSync(packageDefault.counter(gpt4o))
const engines: Record<string, (text: string) => number> = {
  tiktoken: (text) => tiktoken.encode_ordinary(text).length,
  "js-tiktoken": (text) => jsTiktoken.encode(text, [], []).length,
  "gpt-tokenizer": (text) => gptO200k.countTokens(text, ordinary),
  "ctxo default (gpt-tokenizer + routing)": packageCounter.count
}
const reference = corpus.map((d) => engines.tiktoken!(d.text))
const speeds: Record<string, Array<number>> = {}
const mismatches: Record<string, number> = {}
for (const [name, count] of Object.entries(engines)) {
  mismatches[name] = corpus.filter((d, i) => count(d.text) !== reference[i]).length
  speeds[name] = []
}
for (let round = 0; round < rounds; round++) {
  const names = Object.keys(engines)
  for (const name of round % 2 === 0 ? names : names.reverse()) {
    gptO200k.clearMergeCache() // no engine keeps what it learned from the previous round
    const seconds = time(() => {
      for (const d of corpus) engines[name]!(d.text)
    })
    speeds[name]!.push(megabytes / seconds)
  }
}
const base = median(speeds.tiktoken!)
console.log(
  "\n1. engines (o200k_base), median MB/s, ratio to tiktoken, documents whose count differs from tiktoken's"
)
for (const name of Object.keys(engines)) {
  const mbs = median(speeds[name]!)
  console.log(
    `   ${name.padEnd(40)} ${mbs.toFixed(2).padStart(7)} MB/s  ${(mbs / base).toFixed(2)}x  mismatches ${mismatches[name]}`
  )
}

// --- 2. history cold vs warm
const messages: Array<ChatMessage> = []
for (let i = 0; messages.length < 2_000; i++) {
  const d = corpus[i % corpus.length]!
  const offset = (i * 997) % Math.max(1, d.text.length - 1500)
  messages.push({
    role: i % 2 === 0 ? "user" : "assistant",
    content: `${i}: ${d.text.slice(offset, offset + 1500)}`
  })
}
const coldTimes: Array<number> = []
const warmTimes: Array<number> = []
for (let round = 0; round < rounds; round++) {
  const service = Tokenizer.makeUnsafe()
  const counter = Effect.runSync(service.counter(gpt4o))
  gptO200k.clearMergeCache()
  coldTimes.push(time(() => counter.countMessages(messages)))
  warmTimes.push(time(() => counter.countMessages(messages)))
  service.dispose()
}
const cold = median(coldTimes)
const warm = median(warmTimes)
console.log(
  `\n2. 2,000-message history: cold ${(cold * 1000).toFixed(1)} ms, warm ${(warm * 1000).toFixed(2)} ms`
)
console.log(`   warm is ${(cold / warm).toFixed(0)}x faster than cold (target >= 50x)`)

// --- 3. package overhead over the raw encoder
const raw: Array<number> = []
const wrapped: Array<number> = []
const measureRaw = () =>
  time(() => {
    for (const d of corpus) gptO200k.countTokens(d.text, ordinary)
  })
const measureWrapped = () =>
  time(() => {
    for (const d of corpus) packageCounter.count(d.text)
  })
for (let round = 0; round < rounds; round++) {
  // Alternate which goes first; each starts from an empty merge cache.
  for (const which of round % 2 === 0 ? ["raw", "wrapped"] : ["wrapped", "raw"]) {
    gptO200k.clearMergeCache()
    if (which === "raw") raw.push(measureRaw())
    else wrapped.push(measureWrapped())
  }
}
const overhead = median(wrapped) / median(raw) - 1
console.log(
  `\n3. Counter.count (cache off) vs raw gpt-tokenizer: ${(overhead * 100).toFixed(1)}% overhead (target <= 10%)`
)

tiktoken.free()
packageDefault.dispose()
