/**
 * Compresses a tool result for history (seed 002 A3/C1). The running step still sees the full
 * observation; history keeps `status`, the compressed `data` and the whole `error`, and drops
 * `text`, `stats` and `context`.
 *
 * | tool | kept in history |
 * |---|---|
 * | Read | the read range, at most `readLines` (500) lines, with file, range and total |
 * | Grep | pattern, match and file counts, the first `grepMatches` (5) matches with file and line |
 * | LS | directory, counts of files and dirs, the first `lsEntries` (20) entries |
 * | Glob | pattern, count, the first `globEntries` (10) matches |
 * | Edit / MultiEdit | file, changed range(s), snippets up to `snippetLines` (50) lines |
 * | Write | file, created or overwritten, line count, the first `snippetLines` lines |
 * | Bash | command, exit code, stdout as a summary, the last `bashStderrLines` (20) stderr lines |
 * | TodoWrite | a one-line recap |
 * | anything else | head and tail lines with "[… omitted N of M lines …]" |
 *
 * When anything was cut, `truncated: true` and a `readBack` hint name the file that keeps the
 * full result (`tool-results/<callId>.json`, written by the history store).
 */
import { toolResultPath } from "@ctxo/store/Paths"
import type { ToolError } from "./Message.ts"

export interface CompressionLimits {
  readonly readLines: number
  readonly grepMatches: number
  readonly lsEntries: number
  readonly globEntries: number
  readonly snippetLines: number
  readonly bashStderrLines: number
  readonly fallbackHeadLines: number
  readonly fallbackTailLines: number
}

export const defaultLimits: CompressionLimits = {
  readLines: 500,
  grepMatches: 5,
  lsEntries: 20,
  globEntries: 10,
  snippetLines: 50,
  bashStderrLines: 20,
  fallbackHeadLines: 20,
  fallbackTailLines: 10
}

/** A tool's result as the tool returns it. */
export interface RawToolResult {
  readonly status: "success" | "error"
  readonly data?: unknown
  readonly error?: ToolError
  readonly text?: string
  readonly stats?: unknown
  readonly context?: unknown
}

export interface CompressedToolResult {
  readonly status: "success" | "error"
  readonly data?: unknown
  readonly error?: ToolError
  /** True when the data was cut: the full result is kept as a file. */
  readonly truncated: boolean
}

/** Where the full result of a call is kept, relative to the session directory (the store's rule). */
export const fullResultPath: (callId: string) => string = toolResultPath

type Obj = Record<string, unknown>
const isObj = (value: unknown): value is Obj =>
  typeof value === "object" && value !== null && !Array.isArray(value)
const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)
const num = (value: unknown): number | undefined => (typeof value === "number" ? value : undefined)
const lines = (text: string): Array<string> => {
  const all = text.split("\n")
  if (all.length > 1 && all[all.length - 1] === "") all.pop()
  return all
}
const fileOf = (data: Obj) => str(data.file) ?? str(data.path) ?? str(data.file_path) ?? str(data.filePath)

type Rule = (data: unknown, limits: CompressionLimits) => { data: unknown; truncated: boolean }

const read: Rule = (data, limits) => {
  const d = isObj(data) ? data : { content: String(data ?? "") }
  const content = str(d.content) ?? str(d.text) ?? ""
  const all = lines(content)
  const kept = all.slice(0, limits.readLines)
  const startLine = num(d.startLine) ?? num(d.offset) ?? 1
  const truncated = all.length > kept.length
  return {
    truncated,
    data: {
      file: fileOf(d),
      startLine,
      endLine: startLine + Math.max(kept.length - 1, 0),
      totalLines: num(d.totalLines) ?? (truncated ? undefined : all.length),
      content: kept.join("\n"),
      ...(truncated ? { omitted: `${all.length - kept.length} of ${all.length} lines read omitted` } : {}),
      ...(d.mtime === undefined ? {} : { mtime: d.mtime }),
      ...(d.note === undefined ? {} : { note: d.note })
    }
  }
}

interface Match {
  readonly file?: string | undefined
  readonly line?: number | undefined
  readonly text: string
}

const grep: Rule = (data, limits) => {
  const d = isObj(data) ? data : {}
  const raw: Array<unknown> = Array.isArray(d.matches)
    ? d.matches
    : lines(str(d.output) ?? (typeof data === "string" ? data : ""))
  const matches: Array<Match> = raw.map((m) => {
    if (isObj(m))
      return {
        file: fileOf(m),
        line: num(m.line) ?? num(m.lineNumber),
        text: str(m.text) ?? str(m.content) ?? ""
      }
    const parsed = /^([^:]+):(\d+):(.*)$/.exec(String(m))
    return parsed ? { file: parsed[1], line: Number(parsed[2]), text: parsed[3]! } : { text: String(m) }
  })
  const files = new Set(matches.map((m) => m.file).filter((f) => f !== undefined))
  const kept = matches.slice(0, limits.grepMatches)
  return {
    truncated: kept.length < matches.length,
    data: {
      pattern: str(d.pattern),
      totalMatches: num(d.totalMatches) ?? matches.length,
      files: files.size,
      matches: kept.map((m) => (m.file === undefined ? m.text : `${m.file}:${m.line ?? "?"}: ${m.text}`)),
      ...(kept.length < matches.length ? { omitted: `${matches.length - kept.length} more matches` } : {})
    }
  }
}

const ls: Rule = (data, limits) => {
  const d = isObj(data) ? data : { entries: data }
  const entries: Array<unknown> = Array.isArray(d.entries) ? d.entries : Array.isArray(d.files) ? d.files : []
  const named = entries.map((e) =>
    isObj(e)
      ? {
          name: str(e.name) ?? "?",
          dir: e.type === "dir" || e.type === "directory" || e.isDirectory === true
        }
      : {
          name: String(e),
          dir: String(e).endsWith("/")
        }
  )
  const dirs = named.filter((e) => e.dir).length
  const kept = named
    .slice(0, limits.lsEntries)
    .map((e) => (e.dir && !e.name.endsWith("/") ? `${e.name}/` : e.name))
  return {
    truncated: kept.length < named.length,
    data: {
      path: fileOf(d),
      total: named.length,
      files: named.length - dirs,
      dirs,
      entries: kept,
      ...(kept.length < named.length ? { omitted: `${named.length - kept.length} more entries` } : {})
    }
  }
}

const glob: Rule = (data, limits) => {
  const d = isObj(data) ? data : { matches: data }
  const matches = (Array.isArray(d.matches) ? d.matches : Array.isArray(d.files) ? d.files : []).map(String)
  const kept = matches.slice(0, limits.globEntries)
  return {
    truncated: kept.length < matches.length,
    data: {
      pattern: str(d.pattern),
      total: matches.length,
      matches: kept,
      ...(kept.length < matches.length ? { omitted: `${matches.length - kept.length} more matches` } : {})
    }
  }
}

const snippet = (text: string, max: number) => {
  const all = lines(text)
  return { text: all.slice(0, max).join("\n"), lines: all.length, truncated: all.length > max }
}

const edit: Rule = (data, limits) => {
  const d = isObj(data) ? data : {}
  const edits: Array<Obj> = Array.isArray(d.edits) ? d.edits.filter(isObj) : [d]
  let budget = limits.snippetLines
  let truncated = false
  const changes = edits.map((e) => {
    const start = num(e.startLine)
    const after = str(e.newString) ?? str(e.new_string) ?? str(e.diff) ?? ""
    const s = snippet(after, Math.max(budget, 0))
    budget -= Math.min(s.lines, budget)
    truncated ||= s.truncated
    return {
      ...(start === undefined ? {} : { lines: `${start}-${start + Math.max(s.lines - 1, 0)}` }),
      snippet: s.text
    }
  })
  return {
    truncated,
    data: { file: fileOf(d), applied: d.applied ?? true, edits: edits.length, changes }
  }
}

const write: Rule = (data, limits) => {
  const d = isObj(data) ? data : {}
  const s = snippet(str(d.content) ?? "", limits.snippetLines)
  return {
    truncated: s.truncated,
    data: {
      file: fileOf(d),
      action: d.created === false || d.overwritten === true ? "overwritten" : "created",
      lines: s.lines,
      snippet: s.text,
      ...(s.truncated ? { omitted: `${s.lines - limits.snippetLines} of ${s.lines} lines omitted` } : {})
    }
  }
}

const bash: Rule = (data, limits) => {
  const d = isObj(data) ? data : { stdout: String(data ?? "") }
  const stdout = lines(str(d.stdout) ?? "")
  const stderr = lines(str(d.stderr) ?? "")
  const tail = stderr.slice(-limits.bashStderrLines)
  const lastOut = stdout.filter((l) => l.trim() !== "").at(-1)
  return {
    truncated: stdout.length > 0 || tail.length < stderr.length,
    data: {
      command: str(d.command),
      exitCode: num(d.exitCode) ?? num(d.exit_code) ?? num(d.code),
      stdout: `${stdout.length} lines${lastOut === undefined ? "" : `; last: ${lastOut.slice(0, 200)}`}`,
      stderrLines: stderr.length,
      stderrTail: tail.join("\n")
    }
  }
}

const todoWrite: Rule = (data) => {
  const d = isObj(data) ? data : { todos: data }
  const todos = (Array.isArray(d.todos) ? d.todos : []).filter(isObj)
  const by = (status: string) => todos.filter((t) => t.status === status).map((t) => str(t.content) ?? "?")
  const done = by("completed")
  const doing = by("in_progress")
  const pending = by("pending")
  const recap = [
    `${done.length} of ${todos.length} done`,
    ...(doing.length > 0 ? [`in progress: ${doing.join("; ")}`] : []),
    ...(pending.length > 0
      ? [`next: ${pending[0]}${pending.length > 1 ? ` (+${pending.length - 1} more)` : ""}`]
      : [])
  ].join("; ")
  return { truncated: todos.length > 0, data: { recap } }
}

const fallback: Rule = (data, limits) => {
  if (data === undefined) return { truncated: false, data: undefined }
  const text = typeof data === "string" ? data : JSON.stringify(data, null, 2)
  const all = lines(text)
  const keep = limits.fallbackHeadLines + limits.fallbackTailLines
  if (all.length <= keep) return { truncated: false, data }
  const omitted = all.length - keep
  return {
    truncated: true,
    data: [
      ...all.slice(0, limits.fallbackHeadLines),
      `[… omitted ${omitted} of ${all.length} lines …]`,
      ...all.slice(all.length - limits.fallbackTailLines)
    ].join("\n")
  }
}

const rules: Readonly<Record<string, Rule>> = {
  read,
  grep,
  ls,
  glob,
  edit,
  multiedit: edit,
  write,
  bash,
  todowrite: todoWrite,
  // The gateway's shell-like agent tools (read_file and write_file already map to read and write).
  listfiles: ls,
  search: grep,
  readblock: read
}

/** The rule a tool name gets: Read, read_file and ReadFile all get Read's. */
const ruleFor = (tool: string): Rule => {
  const key = tool.toLowerCase().replace(/[^a-z]/g, "")
  return rules[key] ?? rules[key.replace(/file$/, "")] ?? fallback
}

/** Compresses one tool result for history; errors are kept whole. */
export const compressToolResult = (
  tool: string,
  result: RawToolResult,
  limits: Partial<CompressionLimits> = {}
): CompressedToolResult => {
  const effective = { ...defaultLimits, ...limits }
  const { data, truncated } =
    result.data === undefined ? { data: undefined, truncated: false } : ruleFor(tool)(result.data, effective)
  return {
    status: result.status,
    ...(data === undefined ? {} : { data }),
    ...(result.error === undefined ? {} : { error: result.error }),
    truncated
  }
}
