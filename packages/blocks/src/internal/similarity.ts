/** Case-, width- and whitespace-insensitive form of a heading or path, for comparisons only. */
export const normalizeForMatch = (text: string): string =>
  text.normalize("NFKC").toLowerCase().replace(/\s+/g, " ").trim()

const levenshtein = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): number => {
  if (a.length === 0) return b.length
  if (b.length === 0) return a.length
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost)
    }
    previous = current
  }
  return previous[b.length]!
}

const bigrams = (chars: ReadonlyArray<string>): Map<string, number> => {
  const out = new Map<string, number>()
  for (let i = 0; i + 1 < chars.length; i++) {
    const gram = chars[i]! + chars[i + 1]!
    out.set(gram, (out.get(gram) ?? 0) + 1)
  }
  return out
}

const dice = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): number => {
  if (a.length < 2 || b.length < 2) return 0
  const ga = bigrams(a)
  const gb = bigrams(b)
  let shared = 0
  for (const [gram, count] of ga) shared += Math.min(count, gb.get(gram) ?? 0)
  return (2 * shared) / (a.length - 1 + b.length - 1)
}

/**
 * Similarity in [0, 1] of two already-normalized strings, by code point (so Chinese headings compare
 * character by character): the best of edit-distance ratio, bigram overlap, and containment (a
 * heading that was extended or shortened).
 */
export const similarity = (a: string, b: string): number => {
  if (a === b) return 1
  const ca = Array.from(a)
  const cb = Array.from(b)
  const longest = Math.max(ca.length, cb.length)
  if (longest === 0) return 1
  const edit = 1 - levenshtein(ca, cb) / longest
  const [shorter, longer] = ca.length <= cb.length ? [a, b] : [b, a]
  const shorterLength = Math.min(ca.length, cb.length)
  const contained = shorterLength >= 2 && longer.includes(shorter) ? 0.7 + (0.3 * shorterLength) / longest : 0
  return Math.max(edit, dice(ca, cb), contained)
}
