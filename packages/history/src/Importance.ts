/**
 * How important a finished turn is to remember (seed 003: L1 → L2 when importance > 0.6). A
 * score in [0, 1] from documented rules, each adding its weight when it holds, with the reasons
 * that fired, so a promotion can be explained and tested:
 *
 * | rule | weight |
 * |---|---|
 * | the user states something to keep: a preference, a decision, a fact about themselves, a rule ("remember", "always", "never", "I prefer", "we decided", "my ... is", 记住, 总是, 不要, 决定, 我叫, 我喜欢, ...) | 0.5 |
 * | the turn is pinned | 0.3 |
 * | concrete anchors: a date, a time, an amount or a version, or a name (a capitalized word inside a sentence) | 0.15 |
 * | a problem was met and settled: a tool failed in the turn, or the answer says what fixed it ("fixed", "root cause", "resolved", 解决, 原因) | 0.25 |
 * | the turn changed files (a write tool call) | 0.15 |
 * | a substantive answer (80 words or more, or 200 CJK characters) | 0.1 |
 *
 * Small talk ("hi", "thanks") scores 0. The sum is capped at 1.
 */
import type { Message } from "./Message.ts"
import { textOf, toolCallsOf, toolResultsOf } from "./Message.ts"
import type { Turn } from "./Turns.ts"

export const PROMOTION_THRESHOLD = 0.6

export interface Importance {
  readonly score: number
  /** The rules that fired, in the table's order. */
  readonly reasons: ReadonlyArray<string>
}

const KEEP =
  /\b(remember|always|never|i prefer|i'd prefer|i like|i love|i hate|i don't like|we decided|decided to|decision|my (?:name|birthday|wife|husband|partner|sister|brother|mother|father|son|daughter|dog|cat|address|email|phone|team|manager|boss) (?:is|was)|i am a|i'm a|i work (?:at|as|for)|from now on|make sure|must not|don't ever|deadline|important)\b|记住|总是|永远|不要|别再|决定|我叫|我是|我喜欢|我不喜欢|我讨厌|以后都|务必|截止|重要/iu
const ANCHOR =
  /\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}:\d{2}\b|\bv?\d+\.\d+(?:\.\d+)?\b|[$€£¥]\s?\d|\b\d+(?:[.,]\d+)?\s?(?:%|ms|s|kb|mb|gb|usd|eur|km|kg)\b|\d+月\d+[日号]|(?<=[a-z,;:] )[A-Z][a-z]{2,}/u
const SETTLED = /\b(fixed|root cause|resolved|the cause (?:is|was)|works now|solved)\b|解决|原因|修复/iu
const WRITES = /^(write|edit|create|update|patch|apply|delete|move|rename)/i

const wordCount = (text: string) => {
  const cjk = (text.match(/\p{Script=Han}|\p{Script=Hiragana}|\p{Script=Katakana}|\p{Script=Hangul}/gu) ?? [])
    .length
  const words = text
    .replace(/\p{Script=Han}|\p{Script=Hiragana}|\p{Script=Katakana}|\p{Script=Hangul}/gu, " ")
    .split(/\s+/)
    .filter((w) => /\p{L}|\p{N}/u.test(w)).length
  return words + cjk / 2.5
}

/** The importance of a turn by the rules above. */
export const importanceOf = (turn: Turn): Importance => {
  const texts = (role: Message["role"]) =>
    turn.messages
      .filter((m) => m.role === role)
      .map(textOf)
      .join("\n")
  const user = texts("user")
  const assistant = texts("assistant")
  const calls = turn.messages.flatMap(toolCallsOf)
  const results = turn.messages.flatMap(toolResultsOf)
  const finalAnswer = turn.messages
    .filter((m) => m.role === "assistant" && m.meta.kind === "final")
    .map(textOf)
    .join("\n")
  const rules: ReadonlyArray<readonly [boolean, number, string]> = [
    [KEEP.test(user), 0.5, "the user states something to keep (a preference, decision, fact or rule)"],
    [turn.messages.some((m) => m.meta.pinned === true), 0.3, "pinned"],
    [ANCHOR.test(`${user}\n${assistant}`), 0.15, "concrete anchors (a date, time, amount, version or name)"],
    [
      results.some((r) => r.status === "error") || SETTLED.test(assistant),
      0.25,
      "a problem was met and settled"
    ],
    [calls.some((c) => WRITES.test(c.name)), 0.15, "the turn changed files"],
    [wordCount(finalAnswer === "" ? assistant : finalAnswer) >= 80, 0.1, "a substantive answer"]
  ]
  let score = 0
  const reasons: Array<string> = []
  for (const [holds, weight, reason] of rules)
    if (holds) {
      score += weight
      reasons.push(reason)
    }
  return { score: Math.min(1, Math.round(score * 100) / 100), reasons }
}
