import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { analyze, foldSuffix, STOP_WORDS } from "../src/Analyzer.ts"

describe("analyze", () => {
  it("analyzes a long text piece by piece with every word kept, in order", () => {
    // Longer than one piece many times over: the pieces are cut after whitespace, so no word is split.
    const words = Array.from({ length: 20_000 }, (_, i) => `token${i}x`)
    expect(analyze(words.join(" "))).toEqual(words)
    // A piece boundary inside a run with no whitespace is cut, never inside a surrogate pair.
    const emoji = "😀".repeat(3_000)
    expect(() => analyze(`word ${emoji} word`)).not.toThrow()
    expect(analyze(`alpha ${emoji} beta`)).toEqual(["alpha", "beta"])
  })

  it("segments Chinese into words and adds pairs where the dictionary split a word", () => {
    const terms = analyze("如何回滚生产环境的部署")
    // ICU splits the rare word 回滚 into 回 / 滚; the pair of the two one-character words restores it.
    expect(terms).toContain("回滚")
    expect(terms).toContain("生产")
    expect(terms).toContain("部署")
    // function words are gone, and no pair crosses two longer words (产环)
    expect(terms).not.toContain("如何")
    expect(terms).not.toContain("的")
    expect(terms).not.toContain("产环")
  })

  it("pairs inside words of three or more characters and across one-character words only", () => {
    // ICU: 研究生 | 院, 互 | 联 | 网
    expect(analyze("研究生院")).toEqual(["研究生", "院", "研究", "究生"])
    expect(analyze("互联网")).toEqual(["互", "联", "网", "互联", "联网"])
    expect(analyze("研究生院", { cjkBigrams: false })).toEqual(["研究生", "院"])
  })

  it("drops Chinese A-not-A question forms and particles", () => {
    expect(analyze("能不能对接金蝶吗")).toEqual(expect.not.arrayContaining(["能不能", "能不", "不能", "吗"]))
    expect(analyze("能不能对接金蝶吗")).toContain("金蝶")
  })

  it("lower-cases English, drops possessives and stop words, folds plurals and -ing/-ed", () => {
    expect(analyze("The team's Policies are Deploying")).toEqual(["team", "policy", "deploy"])
    expect(analyze("deployed deploys deployment")).toEqual(["deploy", "deploy", "deployment"])
    expect(analyze("boxes keys queries")).toEqual(["box", "key", "query"])
  })

  it("leaves short words and -ss/-us/-is words alone", () => {
    for (const word of ["bus", "access", "status", "analysis", "string", "need", "shred"]) {
      expect(foldSuffix(word)).toBe(word)
    }
    expect(foldSuffix("running")).toBe("run")
    expect(foldSuffix("stopped")).toBe("stop")
    expect(foldSuffix("rolling")).toBe("roll")
  })

  it("keeps identifiers whole and adds their parts", () => {
    expect(analyze("rate_limit")).toEqual(["rate_limit", "rate", "limit"])
    expect(analyze("maxRetries")).toEqual(["maxretries", "max", "retry"])
    expect(analyze("v2.3 returns 502")).toEqual(["v2.3", "v2", "3", "return", "502"])
  })

  it("normalizes full-width characters (NFKC)", () => {
    expect(analyze("ＡＰＩ　Ｋｅｙ １２３")).toEqual(analyze("API Key 123"))
  })

  it("strips one Korean particle when two syllables remain", () => {
    expect(analyze("서버가 배포를")).toEqual(["서버", "배포"])
    expect(analyze("아이")).toEqual(["아이"])
  })

  it("segments Japanese and drops kana particles", () => {
    const terms = analyze("サーバーが東京で落ちました")
    expect(terms).toContain("サーバー")
    expect(terms).toContain("東京")
    expect(terms).not.toContain("が")
  })

  it("gives deterministic terms without spaces, punctuation or stop words (property)", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 60 }), (text) => {
        const terms = analyze(text)
        expect(analyze(text)).toEqual(terms)
        for (const term of terms) {
          expect(term).not.toMatch(/\s/)
          expect(term).not.toBe("")
          expect(STOP_WORDS.has(term)).toBe(false)
        }
      })
    )
  })
})
