/**
 * @file mentions (seed 002 A7, C3, E4): `@src/utils/auth.ts` in the user's message is not inlined;
 * a `<system-reminder>` appended to the message tells the model to read the file(s) first.
 * Mentions are found in order, deduplicated, at most 5 named, then "(and N more…)". An `@` right
 * after a letter or digit (an e-mail address) is not a mention.
 */
const MENTION = /(?<![a-zA-Z0-9])@([a-zA-Z0-9/._-]+(?:\.[a-zA-Z0-9]+)?)/g
export const MAX_NAMED_MENTIONS = 5

export const parseMentions = (text: string): Array<string> => {
  const out: Array<string> = []
  for (const match of text.matchAll(MENTION)) {
    // A sentence may end right after the path: "see @src/a.ts."
    const path = match[1]!.replace(/[./]+$/, "")
    if (path !== "" && !out.includes(path)) out.push(path)
  }
  return out
}

/** The reminder for the mentioned files, or undefined when there are none. */
export const mentionReminder = (mentions: ReadonlyArray<string>): string | undefined => {
  if (mentions.length === 0) return undefined
  const named = mentions.slice(0, MAX_NAMED_MENTIONS).map((m) => `@${m}`)
  const more = mentions.length - named.length
  const list = `${named.join(", ")}${more > 0 ? ` (and ${more} more…)` : ""}`
  const instruction =
    mentions.length === 1
      ? "You MUST read this file with the Read tool before answering."
      : "You MUST read these files with the Read tool, one by one in this order, before answering."
  return `<system-reminder>\nThe user mentioned ${list}.\n${instruction}\n</system-reminder>`
}

/** The user's message with the mention reminder appended (unchanged when nothing is mentioned). */
export const withMentionReminder = (text: string): string => {
  const reminder = mentionReminder(parseMentions(text))
  return reminder === undefined ? text : `${text}\n\n${reminder}`
}
