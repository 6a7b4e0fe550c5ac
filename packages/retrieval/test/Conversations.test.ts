/**
 * The labelled conversation set: the committed fixtures are exactly what the seeded generator
 * writes, and every question's evidence turns exist and hold what it asks about.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { conversationsRoot } from "../bench/sets.ts"
import type { Conversation } from "../src/Conversations.ts"
import {
  addDays,
  generateConversation,
  generateConversations,
  longDate,
  makeRandom,
  RELATIVE_DAYS,
  turnsOf
} from "../src/Conversations.ts"

const committed: Array<Conversation> = readdirSync(conversationsRoot)
  .filter((f) => f.endsWith(".json"))
  .sort()
  .map((f) => JSON.parse(readFileSync(join(conversationsRoot, f), "utf8")))
const generated = generateConversations()

const wordsRun = (a: string, b: string): number => {
  const x = a.toLowerCase().match(/[a-z0-9']+/g) ?? []
  const y = b.toLowerCase().match(/[a-z0-9']+/g) ?? []
  let best = 0
  for (let i = 0; i < x.length; i++) {
    for (let j = 0; j < y.length; j++) {
      let n = 0
      while (i + n < x.length && j + n < y.length && x[i + n] === y[j + n]) n++
      best = Math.max(best, n)
    }
  }
  return best
}

describe("conversation generator", () => {
  it("is deterministic and the committed fixtures are its output", () => {
    expect(generateConversation(4)).toEqual(generateConversation(4))
    expect(committed).toEqual(generated)
  })

  it("a different seed gives different conversations; the PRNG is uniform enough", () => {
    expect(generateConversation(0, 4)).not.toEqual(generateConversation(0))
    const r = makeRandom(1)
    const draws = Array.from({ length: 10_000 }, () => r.next())
    expect(Math.min(...draws)).toBeGreaterThanOrEqual(0)
    expect(Math.max(...draws)).toBeLessThan(1)
    expect(draws.reduce((s, x) => s + x, 0) / draws.length).toBeCloseTo(0.5, 1)
  })

  it("has 10 conversations of 19-32 dated sittings, hundreds of turns, about 1,500 questions", () => {
    expect(generated.length).toBe(10)
    for (const c of generated) {
      expect(c.sittings.length).toBeGreaterThanOrEqual(19)
      expect(c.sittings.length).toBeLessThanOrEqual(32)
      expect(turnsOf(c).length).toBeGreaterThanOrEqual(200)
      expect(turnsOf(c).map((t) => t.turn)).toEqual(turnsOf(c).map((_, i) => i + 1))
      const dates = c.sittings.map((s) => s.date)
      expect([...dates].sort()).toEqual(dates)
      expect(new Set(dates).size).toBe(dates.length)
      expect(c.speakers[0]).not.toBe(c.speakers[1])
    }
    const questions = generated.flatMap((c) => c.questions)
    expect(questions.length).toBeGreaterThanOrEqual(1_400)
    expect(questions.length).toBeLessThanOrEqual(1_600)
    for (const kind of ["single-hop", "multi-hop", "temporal"] as const) {
      expect(questions.filter((q) => q.kind === kind).length).toBeGreaterThanOrEqual(150)
    }
  })

  it("every question's evidence turns exist and contain what it asks about", () => {
    for (const c of generated) {
      const turns = turnsOf(c)
      const dateOf = new Map(c.sittings.flatMap((s) => s.turns.map((t) => [t.turn, s.date] as const)))
      const questionTexts = new Set<string>()
      for (const q of c.questions) {
        const where = `${c.id}: ${q.question}`
        expect(questionTexts.has(q.question), `${where} asked twice`).toBe(false)
        questionTexts.add(q.question)
        expect(q.evidence.length, where).toBe(q.kind === "multi-hop" ? 2 : 1)
        expect(
          [...q.evidence].sort((a, b) => a - b),
          where
        ).toEqual(q.evidence)
        const texts = q.evidence.map((n) => {
          const turn = turns[n - 1]
          expect(turn?.turn, where).toBe(n)
          return `${turn!.user}\n${turn!.assistant}`
        })
        if (q.kind === "temporal") {
          // the answer is the sitting's date moved by the one relative day the turn says
          const said = RELATIVE_DAYS.filter(([phrase]) => texts[0]!.includes(` ${phrase}`))
          expect(said.length, where).toBe(1)
          expect(q.answer, where).toBe(longDate(addDays(dateOf.get(q.evidence[0]!)!, said[0]![1])))
        } else {
          expect(texts.join("\n").toLowerCase(), where).toContain(q.answer.toLowerCase())
        }
        if (q.kind === "multi-hop") {
          // linked: both turns name the link, and the answer is only in the later one
          for (const text of texts) expect(text, where).toContain(q.link)
          expect(texts[0]!.toLowerCase(), where).not.toContain(q.answer.toLowerCase())
        }
        // paraphrased: never five words in a row taken from the evidence
        for (const text of texts) expect(wordsRun(q.question, text), where).toBeLessThanOrEqual(4)
      }
    }
  })
})
