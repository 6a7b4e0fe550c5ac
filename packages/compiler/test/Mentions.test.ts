import { describe, expect, it } from "@effect/vitest"
import { mentionReminder, parseMentions, withMentionReminder } from "../src/Mentions.ts"

describe("@file mentions", () => {
  it("adds the seed's reminder for one file, without inlining it", () => {
    expect(withMentionReminder("Fix the bug in @src/utils/auth.ts.")).toBe(
      "Fix the bug in @src/utils/auth.ts.\n\n<system-reminder>\nThe user mentioned @src/utils/auth.ts.\nYou MUST read this file with the Read tool before answering.\n</system-reminder>"
    )
  })

  it("keeps order, removes duplicates, names at most 5, and skips e-mail addresses", () => {
    const text =
      "Compare @a.ts @b.ts @a.ts @c/d.md @e.json @f.ts @g.ts @h.ts; mail ops@example.com or me@corp.io"
    expect(parseMentions(text)).toEqual(["a.ts", "b.ts", "c/d.md", "e.json", "f.ts", "g.ts", "h.ts"])
    expect(mentionReminder(parseMentions(text))).toBe(
      "<system-reminder>\nThe user mentioned @a.ts, @b.ts, @c/d.md, @e.json, @f.ts (and 2 more…).\nYou MUST read these files with the Read tool, one by one in this order, before answering.\n</system-reminder>"
    )
    expect(withMentionReminder("write to team@example.com")).toBe("write to team@example.com")
  })
})
