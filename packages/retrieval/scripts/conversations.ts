/**
 * Writes the labelled conversation set to `fixtures/retrieval/conversations/<id>.json` (one file per
 * conversation, two-space JSON). Deterministic: the same seed always writes the same bytes.
 *
 *   pnpm --filter @ctxo/retrieval conversations [--seed N] [--count N] [--out DIR]
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { conversationsRoot } from "../bench/sets.ts"
import { DEFAULT_COUNT, DEFAULT_SEED, generateConversations, turnsOf } from "../src/Conversations.ts"

/**
 * Two-space JSON with arrays of numbers and short arrays of strings on one line: the layout the
 * repository's formatter gives, so the written files pass its check unchanged.
 */
const toJsonText = (value: unknown): string =>
  `${JSON.stringify(value, null, 2).replace(/\[\n\s*((?:-?\d+|"[^"\n]{0,40}")(?:,\n\s*(?:-?\d+|"[^"\n]{0,40}"))*)\n\s*\]/g, (_, items: string) => `[${items.split(/,\n\s*/).join(", ")}]`)}\n`

const { values } = parseArgs({
  options: {
    seed: { type: "string", default: String(DEFAULT_SEED) },
    count: { type: "string", default: String(DEFAULT_COUNT) },
    out: { type: "string", default: conversationsRoot }
  }
})
const conversations = generateConversations({ seed: Number(values.seed), count: Number(values.count) })
mkdirSync(values.out, { recursive: true })
for (const file of readdirSync(values.out).filter((f) => /^conv-\d+\.json$/.test(f)))
  rmSync(join(values.out, file))
let bytes = 0
for (const conversation of conversations) {
  const text = toJsonText(conversation)
  bytes += Buffer.byteLength(text)
  writeFileSync(join(values.out, `${conversation.id}.json`), text)
}
const turns = conversations.reduce((n, c) => n + turnsOf(c).length, 0)
const questions = conversations.flatMap((c) => c.questions)
const kinds = (["single-hop", "multi-hop", "temporal"] as const).map(
  (kind) => `${kind} ${questions.filter((q) => q.kind === kind).length}`
)
console.log(
  `${conversations.length} conversations, ${turns} turns, ${questions.length} questions (${kinds.join(", ")}), ${(bytes / 1024).toFixed(0)} KiB -> ${values.out}`
)
