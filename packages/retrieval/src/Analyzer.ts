/**
 * Text -> search terms, the same way for documents and queries.
 *
 * 1. NFKC normalization (full-width Latin and digits become ASCII, half-width katakana full-width),
 *    then lower case.
 * 2. Words by `Intl.Segmenter` (word granularity): ICU's dictionaries split Chinese and Japanese
 *    into words, Korean and Latin scripts split at spaces and punctuation. Only word-like segments
 *    are kept (no punctuation, no spaces).
 * 3. Latin words: a possessive `'s` is dropped, and (option `stem`, on by default) a light suffix
 *    folding: plurals (`policies` -> `policy`, `boxes` -> `box`, `keys` -> `key`), `-ing` and `-ed`
 *    (`deploying`, `deployed` -> `deploy`; `rotating`, `rotated` -> `rotat`). It is not a full
 *    stemmer: words under four letters are never folded (`bus`, `was`), `-ss`, `-us`, `-is` keep
 *    their `s` (`access`, `status`, `analysis`), and `-ing`/`-ed` go only when four letters with a
 *    vowel remain (`string`, `need`, `shred` stay).
 *    Identifiers keep their whole form and add their parts: `rate_limit` gives `rate_limit`, `rate`,
 *    `limit`; `maxRetries` gives `maxretries`, `max`, `retry`.
 * 4. Han (Chinese and the kanji of Japanese) runs: the dictionary words, plus (option `cjkBigrams`, on
 *    by default) every pair of adjacent Han characters of the run. The dictionary splits rare words
 *    (`回滚` comes out as `回` `滚`, `数据库` as `数据` `库`); the bigrams make such words match
 *    whatever the segmenter did with them on the other side.
 * 5. Korean words drop one trailing particle (`서버가` -> `서버`, `배포를` -> `배포`) when at least two
 *    syllables remain, so a query without the particle matches.
 * 6. Stop words (English and Chinese function words, see `STOP_WORDS`) are removed; a single Latin
 *    letter is dropped; digits are kept (`502`, `v2.3`).
 *
 * `ANALYZER_VERSION` changes whenever any of this changes the terms of some text: an index saved by
 * another version is refused by `SearchIndex.fromJSON` instead of being searched with other terms.
 */

export const ANALYZER_VERSION = 1

export interface AnalyzerOptions {
  /** Fold plural, `-ing` and `-ed` suffixes of Latin words (default true). */
  readonly stem?: boolean
  /** Add the adjacent-character pairs of Han runs (default true). */
  readonly cjkBigrams?: boolean
}

export const defaultAnalyzerOptions: Required<AnalyzerOptions> = { stem: true, cjkBigrams: true }

/** English function words and Chinese particles, pronouns and question words. */
export const STOP_WORDS: ReadonlySet<string> = new Set([
  // English
  "a",
  "about",
  "after",
  "again",
  "all",
  "also",
  "am",
  "an",
  "and",
  "any",
  "are",
  "as",
  "at",
  "be",
  "been",
  "before",
  "being",
  "both",
  "but",
  "by",
  "can",
  "could",
  "did",
  "do",
  "does",
  "doing",
  "done",
  "each",
  "for",
  "from",
  "get",
  "got",
  "had",
  "has",
  "have",
  "having",
  "he",
  "her",
  "here",
  "him",
  "his",
  "how",
  "i",
  "if",
  "in",
  "into",
  "is",
  "it",
  "its",
  "itself",
  "just",
  "me",
  "my",
  "myself",
  "no",
  "nor",
  "not",
  "of",
  "off",
  "on",
  "once",
  "only",
  "or",
  "other",
  "our",
  "ours",
  "out",
  "over",
  "own",
  "please",
  "same",
  "she",
  "should",
  "so",
  "some",
  "such",
  "than",
  "that",
  "the",
  "their",
  "them",
  "then",
  "there",
  "these",
  "they",
  "this",
  "those",
  "through",
  "to",
  "too",
  "under",
  "until",
  "up",
  "us",
  "very",
  "was",
  "we",
  "were",
  "what",
  "when",
  "where",
  "which",
  "while",
  "who",
  "whom",
  "why",
  "will",
  "with",
  "would",
  "you",
  "your",
  "yours",
  "yourself",
  // Chinese
  "的",
  "了",
  "着",
  "过",
  "是",
  "在",
  "和",
  "与",
  "及",
  "或",
  "也",
  "都",
  "就",
  "还",
  "又",
  "而",
  "且",
  "把",
  "被",
  "给",
  "对",
  "向",
  "到",
  "为",
  "以",
  "于",
  "之",
  "其",
  "该",
  "这",
  "那",
  "这个",
  "那个",
  "这些",
  "那些",
  "哪",
  "哪个",
  "哪些",
  "哪里",
  "什么",
  "怎么",
  "怎样",
  "怎么样",
  "如何",
  "为什么",
  "怎么办",
  "能不能",
  "可不可以",
  "是不是",
  "有没有",
  "要不要",
  "会不会",
  "吗",
  "呢",
  "吧",
  "啊",
  "呀",
  "嘛",
  "么",
  "我",
  "你",
  "您",
  "他",
  "她",
  "它",
  "我们",
  "你们",
  "他们",
  "她们",
  "它们",
  "自己",
  "有",
  "没有",
  "要",
  "会",
  "能",
  "可以",
  "应该",
  "需要",
  "请",
  "一个",
  "一下",
  "如果",
  "但是",
  "因为",
  "所以",
  "然后",
  "时候",
  "已经",
  "可能",
  "就是",
  "还是",
  "以及",
  "等",
  "个",
  "上",
  "下",
  "中",
  "里",
  "后",
  "前",
  // Japanese particles and endings (kana only; kanji words are kept)
  "は",
  "が",
  "を",
  "に",
  "で",
  "と",
  "も",
  "へ",
  "や",
  "から",
  "まで",
  "です",
  "ます",
  "ました",
  "した",
  "ま",
  "て",
  "た",
  "な",
  "か",
  "よ",
  "ね"
])

// Korean particles (longest first so `에서` wins over `서`).
const KOREAN_PARTICLES = [
  "에서는",
  "에게서",
  "으로는",
  "에서",
  "에게",
  "으로",
  "까지",
  "부터",
  "처럼",
  "보다",
  "하고",
  "이랑",
  "은",
  "는",
  "이",
  "가",
  "을",
  "를",
  "에",
  "의",
  "도",
  "로",
  "와",
  "과",
  "만",
  "랑"
]

const HAN_WORD = /^\p{Script=Han}+$/u
const HANGUL_WORD = /^\p{Script=Hangul}+$/u
const LATIN_WORD = /^[\p{Script=Latin}\d_.'’-]+$/u
// A plain ASCII word, capitalized at most on its first letter.
const PLAIN_WORD = /^[A-Za-z][a-z]*$/
const HAS_LETTER_OR_DIGIT = /[\p{L}\p{N}]/u

const segmenter = new Intl.Segmenter("zh", { granularity: "word" })

/** Plural, `-ing` and `-ed` folding of one lower-case Latin word (see the module comment). */
export const foldSuffix = (word: string): string => {
  if (word.length < 4 || !/^[a-z]+$/.test(word)) return word
  if (word.endsWith("ies")) return `${word.slice(0, -3)}y`
  if (/(ss|x|ch|sh|zz)es$/.test(word)) return word.slice(0, -2)
  if (word.endsWith("s")) return /(ss|us|is)$/.test(word) ? word : word.slice(0, -1)
  if (word.endsWith("ied")) return `${word.slice(0, -3)}y`
  const suffix = word.endsWith("ing") ? 3 : word.endsWith("ed") ? 2 : 0
  if (suffix === 0) return word
  const stem = word.slice(0, -suffix)
  // `string`, `spring`, `need`: too little would be left.
  if (stem.length < 4 || !/[aeiouy]/.test(stem)) return word
  return /([b-df-hj-np-tv-z])\1$/.test(stem) && !/(ll|ss|zz)$/.test(stem) ? stem.slice(0, -1) : stem
}

const latinTerms = (word: string, original: string, stem: boolean, out: Array<string>) => {
  const base = word.replace(/['’]s$/, "").replace(/['’]/g, "")
  const fold = (w: string) => (stem ? foldSuffix(w) : w)
  const parts = original
    .replace(/['’]s$/, "")
    .split(/[_.-]+|(?<=[a-z])(?=[A-Z])/)
    .map((p) => p.toLowerCase().normalize("NFKC"))
    .filter((p) => p !== "")
  if (parts.length > 1) {
    // An identifier or a version: the whole form first, then its parts.
    if (base.length > 1 && !STOP_WORDS.has(base)) out.push(base)
    for (const part of parts) {
      if (!/^\d+$/.test(part) && (part.length < 2 || STOP_WORDS.has(part))) continue
      out.push(fold(part))
    }
    return
  }
  if (base.length < 2 && !/\d/.test(base)) return
  if (STOP_WORDS.has(base)) return
  out.push(fold(base))
}

const hangulTerm = (word: string): string => {
  for (const particle of KOREAN_PARTICLES) {
    if (word.endsWith(particle) && word.length - particle.length >= 2) return word.slice(0, -particle.length)
  }
  return word
}

/**
 * The terms of a text, in order (a term repeats as often as it occurs: BM25 counts frequencies).
 * Deterministic and pure.
 */
export const analyze = (text: string, options: AnalyzerOptions = {}): Array<string> => {
  const stem = options.stem ?? defaultAnalyzerOptions.stem
  const bigrams = options.cjkBigrams ?? defaultAnalyzerOptions.cjkBigrams
  const out: Array<string> = []
  // The current run of Han words that are not stop words, for the character pairs.
  let run: Array<string> = []
  const endRun = () => {
    if (bigrams) hanPairs(run, out)
    run = []
  }
  for (const { segment, isWordLike } of segmentsOf(text.normalize("NFKC"))) {
    if (PLAIN_WORD.test(segment)) {
      // The common case, the same terms as `latinTerms` gives it, without its identifier handling.
      endRun()
      const lower = segment.toLowerCase()
      if (lower.length >= 2 && !STOP_WORDS.has(lower)) out.push(stem ? foldSuffix(lower) : lower)
      continue
    }
    if (!isWordLike || !HAS_LETTER_OR_DIGIT.test(segment)) {
      endRun()
      continue
    }
    const lower = segment.toLowerCase()
    if (HAN_WORD.test(lower)) {
      if (STOP_WORDS.has(lower)) {
        endRun()
      } else {
        out.push(lower)
        run.push(lower)
      }
      continue
    }
    endRun()
    if (HANGUL_WORD.test(lower)) out.push(hangulTerm(lower))
    else if (LATIN_WORD.test(segment)) latinTerms(lower, segment, stem, out)
    else if (!STOP_WORDS.has(lower)) out.push(lower)
  }
  endRun()
  return out
}

/**
 * The longest piece given to `Intl.Segmenter` at once: its iteration slows down with the length
 * of the string (80,000 words took a minute in one piece, a tenth of a second in pieces).
 */
const PIECE = 2_048

/** The text's segments, segmenting it piece by piece, each piece cut after whitespace where there is some. */
function* segmentsOf(text: string): Generator<Intl.SegmentData> {
  for (let start = 0; start < text.length; ) {
    let end = Math.min(text.length, start + PIECE)
    if (end < text.length) {
      const space = text.slice(start, end).search(/\s\S*$/)
      if (space > 0) end = start + space + 1
      // Never between the two halves of a surrogate pair.
      else if (/[\uD800-\uDBFF]/.test(text[end - 1]!)) end--
    }
    yield* segmenter.segment(text.slice(start, end))
    start = end
  }
}

/**
 * Character pairs of a run of Han words, where the dictionary may split a word differently on the
 * other side: inside words of three or more characters (`数据库` -> `数据` `据库`), and across two
 * adjacent one-character words (`回` `滚` -> `回滚`). Pairs across longer words (`生产` `环境` ->
 * `产环`) are left out: they are rarely words.
 */
const hanPairs = (words: ReadonlyArray<string>, out: Array<string>) => {
  for (let w = 0; w < words.length; w++) {
    const word = words[w]!
    if (word.length >= 3) for (let i = 0; i + 1 < word.length; i++) out.push(word.slice(i, i + 2))
    const next = words[w + 1]
    if (word.length === 1 && next?.length === 1) out.push(`${word}${next}`)
  }
}
