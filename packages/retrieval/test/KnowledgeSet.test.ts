/**
 * The labelled knowledge set (`fixtures/retrieval/knowledge`): every question names a block that
 * exists, the set is as large and as bilingual as the benchmark claims, and questions are
 * paraphrases, not sentences copied out of their block.
 */
import { describe, expect, it } from "@effect/vitest"
import { knowledgeDocuments, knowledgeFiles, knowledgeQuestions } from "../bench/sets.ts"
import { markdownBlockIds, markdownFileBlocks } from "../src/MarkdownSource.ts"

const files = knowledgeFiles()
const documents = knowledgeDocuments(files)
const questions = knowledgeQuestions()

/** The longest run of words (English) or of Han characters and Latin words (Chinese) both texts contain. */
const longestSharedRun = (a: string, b: string, lang: "en" | "zh"): number => {
  const units = (t: string) =>
    t.toLowerCase().match(lang === "en" ? /[a-z0-9']+/g : /\p{Script=Han}|[a-z0-9_]+/gu) ?? []
  const x = units(a)
  const y = units(b)
  let best = 0
  const row = new Array<number>(y.length + 1).fill(0)
  for (let i = 1; i <= x.length; i++) {
    let prev = 0
    for (let j = 1; j <= y.length; j++) {
      const keep = row[j]!
      row[j] = x[i - 1] === y[j - 1] ? prev + 1 : 0
      best = Math.max(best, row[j]!)
      prev = keep
    }
  }
  return best
}

describe("knowledge set", () => {
  it("has at least 220 blocks with a body, in English and Chinese files", () => {
    expect(documents.length).toBeGreaterThanOrEqual(220)
    expect(files.some((f) => /^[a-z]/.test(f.path))).toBe(true)
    expect(files.some((f) => /\p{Script=Han}/u.test(f.path))).toBe(true)
  })

  it("splits with the blocks package: ids are heading paths, and each block's text starts at its heading", () => {
    for (const file of files) {
      const ids = new Set(markdownBlockIds(file.content, file.path))
      for (const block of markdownFileBlocks(file.content, file.path)) {
        expect(ids.has(block.id)).toBe(true)
        expect(block.text).toMatch(/^#{1,6} /)
      }
    }
  })

  it("labels every question with a block that exists", () => {
    const ids = new Set(documents.map((d) => d.id))
    const missing = questions.filter((q) => !ids.has(q.block)).map((q) => `${q.id}: ${q.block}`)
    expect(missing).toEqual([])
  })

  it("has at least 70 questions, 30 in each language, with unique ids", () => {
    expect(questions.length).toBeGreaterThanOrEqual(70)
    expect(questions.filter((q) => q.lang === "zh").length).toBeGreaterThanOrEqual(30)
    expect(questions.filter((q) => q.lang === "en").length).toBeGreaterThanOrEqual(30)
    expect(new Set(questions.map((q) => q.id)).size).toBe(questions.length)
    // and some can only be answered from a block's body, not its headings
    expect(questions.filter((q) => q.kind === "content").length).toBeGreaterThanOrEqual(20)
  })

  it("asks in the user's words: no question shares a long run of words with its block", () => {
    const text = new Map(documents.map((d) => [d.id, d.text]))
    const copied = questions
      .map((q) => ({ q, run: longestSharedRun(q.question, text.get(q.block) ?? "", q.lang) }))
      .filter(({ q, run }) => run > (q.lang === "en" ? 5 : 8))
      .map(({ q, run }) => `${q.id} (${run}): ${q.question}`)
    expect(copied).toEqual([])
  })
})
