import { describe, expect, it } from "@effect/vitest"
import { compressToolResult } from "../src/ToolResultCompressor.ts"

const numbered = (n: number, f: (i: number) => string) =>
  Array.from({ length: n }, (_, i) => f(i + 1)).join("\n")
const data = (result: { data?: unknown }) => result.data as Record<string, unknown>

describe("compressToolResult", () => {
  it("Read keeps at most 500 lines of the read range and says what it omitted", () => {
    const content = numbered(3000, (i) => `${String(i).padStart(5)}\tconst value${i} = compute(${i})`)
    const result = compressToolResult("Read", {
      status: "success",
      data: { file: "src/big.ts", content, totalLines: 3000, mtime: 1700000000000 },
      text: content,
      stats: { ms: 12 },
      context: { path: "src/big.ts" }
    })
    const d = data(result)
    expect(result.truncated).toBe(true)
    expect((d.content as string).split("\n")).toHaveLength(500)
    expect(d).toMatchObject({
      file: "src/big.ts",
      startLine: 1,
      endLine: 500,
      totalLines: 3000,
      mtime: 1700000000000
    })
    expect(d.omitted).toBe("2500 of 3000 lines read omitted")
    expect(Object.keys(result)).toEqual(["status", "data", "truncated"])
    const exactly = compressToolResult("Read", {
      status: "success",
      data: { file: "a.ts", content: numbered(500, String) }
    })
    expect([exactly.truncated, (data(exactly).content as string).split("\n").length]).toEqual([false, 500])
  })

  it("Grep keeps the first 5 matches with file and line, and the counts", () => {
    const matches = Array.from({ length: 200 }, (_, i) => ({
      file: `src/m${i % 40}.ts`,
      line: i + 1,
      text: `TODO fix ${i}`
    }))
    const result = compressToolResult("Grep", { status: "success", data: { pattern: "TODO", matches } })
    expect(data(result)).toEqual({
      pattern: "TODO",
      totalMatches: 200,
      files: 40,
      matches: [
        "src/m0.ts:1: TODO fix 0",
        "src/m1.ts:2: TODO fix 1",
        "src/m2.ts:3: TODO fix 2",
        "src/m3.ts:4: TODO fix 3",
        "src/m4.ts:5: TODO fix 4"
      ],
      omitted: "195 more matches"
    })
    const text = compressToolResult("grep", { status: "success", data: "a.ts:3:x\nb.ts:9:y\n" })
    expect([text.truncated, data(text).matches]).toEqual([false, ["a.ts:3: x", "b.ts:9: y"]])
  })

  it("LS and Glob keep the first entries and the counts", () => {
    const entries = [
      ...Array.from({ length: 280 }, (_, i) => `file${i}.ts`),
      ...Array.from({ length: 20 }, (_, i) => `dir${i}/`)
    ]
    const ls = data(compressToolResult("LS", { status: "success", data: { path: "src", entries } }))
    expect(ls).toMatchObject({ path: "src", total: 300, files: 280, dirs: 20, omitted: "280 more entries" })
    expect(ls.entries).toHaveLength(20)
    const glob = data(
      compressToolResult("Glob", {
        status: "success",
        data: { pattern: "**/*.ts", matches: entries.slice(0, 50) }
      })
    )
    expect(glob).toMatchObject({ pattern: "**/*.ts", total: 50, omitted: "40 more matches" })
    expect(glob.matches).toEqual(entries.slice(0, 10))
  })

  it("Write keeps file, action, line count and the first 50 lines of a 300-line file", () => {
    const content = numbered(300, (i) => `line ${i}`)
    const result = compressToolResult("Write", {
      status: "success",
      data: { file: "src/new.ts", content, created: true }
    })
    expect(data(result)).toMatchObject({
      file: "src/new.ts",
      action: "created",
      lines: 300,
      omitted: "250 of 300 lines omitted"
    })
    expect((data(result).snippet as string).split("\n")).toEqual(numbered(50, (i) => `line ${i}`).split("\n"))
  })

  it("Edit and MultiEdit keep the file, the changed ranges and at most 50 snippet lines in all", () => {
    const edit = compressToolResult("Edit", {
      status: "success",
      data: { file: "src/a.ts", oldString: "x", newString: numbered(120, (i) => `new ${i}`), startLine: 10 }
    })
    expect(data(edit)).toMatchObject({ file: "src/a.ts", applied: true, edits: 1 })
    const change = (data(edit).changes as Array<{ lines: string; snippet: string }>)[0]!
    expect(change.lines).toBe("10-129")
    expect(change.snippet.split("\n")).toHaveLength(50)
    const multi = compressToolResult("MultiEdit", {
      status: "success",
      data: {
        file: "src/b.ts",
        edits: [0, 1, 2].map((k) => ({ oldString: "a", newString: numbered(30, (i) => `e${k}-${i}`) }))
      }
    })
    const snippets = (data(multi).changes as Array<{ snippet: string }>).map(
      (c) => c.snippet.split("\n").filter(Boolean).length
    )
    expect(snippets).toEqual([30, 20, 0])
    expect(multi.truncated).toBe(true)
  })

  it("Bash keeps the command, exit code, a stdout summary and the last 20 stderr lines", () => {
    const stderr = numbered(400, (i) => `error TS${1000 + i}: something broke at line ${i}`)
    const result = compressToolResult("Bash", {
      status: "error",
      data: { command: "pnpm build", exitCode: 2, stdout: "building...\ncompiling 120 files\n", stderr },
      error: { code: "exit_2", message: "Command failed with exit code 2" }
    })
    expect(result.error).toEqual({ code: "exit_2", message: "Command failed with exit code 2" })
    expect(data(result)).toMatchObject({
      command: "pnpm build",
      exitCode: 2,
      stdout: "2 lines; last: compiling 120 files",
      stderrLines: 400
    })
    expect((data(result).stderrTail as string).split("\n")).toEqual(stderr.split("\n").slice(380))
  })

  it("TodoWrite keeps a recap only", () => {
    const result = compressToolResult("TodoWrite", {
      status: "success",
      data: {
        todos: [
          { content: "Parse config", status: "completed" },
          { content: "Write tests", status: "in_progress" },
          { content: "Benchmark", status: "pending" },
          { content: "Docs", status: "pending" }
        ]
      }
    })
    expect(data(result)).toEqual({
      recap: "1 of 4 done; in progress: Write tests; next: Benchmark (+1 more)"
    })
  })

  it("falls back to head and tail with a marker for unknown tools, and keeps errors whole", () => {
    const output = numbered(100, (i) => `row ${i}`)
    const result = compressToolResult("WebFetch", { status: "success", data: output })
    const lines = (result.data as string).split("\n")
    expect(lines).toHaveLength(31)
    expect(lines[20]).toBe("[… omitted 70 of 100 lines …]")
    expect([lines[0], lines[30]]).toEqual(["row 1", "row 100"])
    const error = compressToolResult("WebFetch", {
      status: "error",
      error: { code: "ETIMEDOUT", message: "x".repeat(5000) }
    })
    expect(error).toEqual({
      status: "error",
      error: { code: "ETIMEDOUT", message: "x".repeat(5000) },
      truncated: false
    })
  })

  it("takes its limits from the caller", () => {
    const result = compressToolResult(
      "Grep",
      { status: "success", data: { matches: ["a", "b", "c"] } },
      { grepMatches: 2 }
    )
    expect(data(result).matches).toEqual(["a", "b"])
  })
})
