/**
 * The layout of a data root and its naming rules, in one place. Every other package asks the store
 * for files by these names; none spells them itself.
 *
 *   <root>/sessions.json                     the sessions index (thin records: id, concept,
 *                                            createdAt, state, stateChangedAt, metadata)
 *   <root>/distributions.json                task distributions (the latest ones, for idempotent
 *                                            retries and crash recovery)
 *   <root>/<file>                            global files: regular files at the top of the root
 *                                            (profile.md, system-prompt.md, any other), never
 *                                            an index (sessions.json, distributions.json) or a
 *                                            dot file
 *   <root>/<sessionId>/...                   a session's files
 *   <root>/<sessionId>/messages.json         its history (written by the history recorder)
 *   <root>/<sessionId>/messages.journal      the changes recorded since messages.json was last
 *                                            written whole (`HistoryJournal.ts`), read as part of it
 *   <root>/<sessionId>/tool-results/<id>.json  full tool results (written by the recorder)
 *   <root>/<sessionId>/context-config.json   its compile manifest
 *   <root>/<sessionId>/tasks.json            its tasks (written by the task API, under the lock)
 *   <root>/<sessionId>/map.json              its thinking map (`@ctxo/compiler/ThinkingMap`)
 *   <root>/<sessionId>/runs/<runId>.json     its plan-execute-reflect runs (written by the orchestrator)
 *   <root>/tenants/<tenant>/                 tenant data roots (gateway with API keys)
 *
 * A path is relative, uses `/`, and has no `..`, NUL, drive letter, URL scheme, backslash, leading
 * `~` or percent-encoded escape; no segment is over 255 bytes. A session id is one segment of
 * letters, digits, `.`, `_` and `-`, starting with a letter or digit, at most 128 characters, and
 * not a reserved name (a global file's name, an index's name, `tenants`, a temporary file's name).
 */
import { Effect, Either } from "effect"
import { PathRefused } from "./StoreErrors.ts"

export const INDEX_FILE = "sessions.json"
/** The distributions of tasks to sessions (the latest `MAX_DISTRIBUTIONS`). */
export const DISTRIBUTIONS_FILE = "distributions.json"
/** Distributions kept in `distributions.json` (older ones are dropped). */
export const MAX_DISTRIBUTIONS = 1000
/** Memory beyond a session: the agent-level (L3) and global (L4) entries (`MemoryEntry`). */
export const GLOBAL_MEMORY_FILE = "memory.json"
/** The data root's knowledge index (`@ctxo/agent/KnowledgeIndex`), saved so a restart indexes nothing. */
export const KNOWLEDGE_INDEX_FILE = "knowledge-index.json"
/** Files at the top of the root that only the store writes and no session may read. */
export const ROOT_INDEX_FILES: ReadonlyArray<string> = [
  INDEX_FILE,
  DISTRIBUTIONS_FILE,
  GLOBAL_MEMORY_FILE,
  KNOWLEDGE_INDEX_FILE
]
export const isRootIndexFile = (name: string): boolean => ROOT_INDEX_FILES.includes(name)
export const HISTORY_FILE = "messages.json"
/**
 * A session's history journal: one line per recorded change since messages.json was last written
 * whole (`HistoryJournal.ts`). It is read as part of messages.json; nobody reads or writes it by name.
 */
export const HISTORY_JOURNAL = "messages.journal"
export const MANIFEST_FILE = "context-config.json"
/** A session's tasks: a JSON array (`Task` in Store.ts), written by the task API. */
export const TASKS_FILE = "tasks.json"
/** A session's memory: its L2 entries and the pins and deletions of its L1 view (`MemoryEntry`). */
export const MEMORY_FILE = "memory.json"
/** A session's thinking map: its nodes, their relations and conclusions (`@ctxo/compiler/ThinkingMap`). */
export const MAP_FILE = "map.json"
export const TOOL_RESULTS_DIR = "tool-results"
/** A session's plan-execute-reflect runs: `runs/<runId>.json` (`EnhancedState`), written by the orchestrator. */
export const RUNS_DIR = "runs"
/** A run id: 1-64 letters, digits, `_` or `-`, starting with a letter or digit. */
export const RUN_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/
/** Where a run's state is kept, relative to the session directory (the id checked by `RUN_ID` first). */
export const runPath = (runId: string): string => `${RUNS_DIR}/${runId}.json`
export const TENANTS_DIR = "tenants"
/** Global files every data root has (others are any regular file at the top of the root). */
export const GLOBAL_FILES: ReadonlyArray<string> = ["profile.md", "system-prompt.md"]
/** What an interrupted atomic write leaves behind: `.<name>.<pid>.<n>.ctxo-tmp`. */
export const TEMP_SUFFIX = ".ctxo-tmp"
/** The suffix of temporary files written before this store (still cleaned at start-up). */
export const LEGACY_TEMP = /^\..+\.\d+\.\d+\.\d+\.tmp$/

export const MAX_SEGMENT_BYTES = 255
export const MAX_PATH_BYTES = 4096

/** Where the full result of a tool call is kept, relative to the session directory. */
export const toolResultPath = (callId: string): string =>
  `${TOOL_RESULTS_DIR}/${callId.replace(/[^a-zA-Z0-9._-]/g, "_").slice(0, 200)}.json`

/**
 * Files of a session that control how it is compiled, recorded and what it is asked to do (its
 * tasks). The model's tools may not write them unless the session's manifest allows it;
 * `messages.json`, `messages.journal` and `tool-results/` are written by the history recorder only.
 */
export const isControlFile = (path: string): boolean =>
  path === MANIFEST_FILE ||
  path === TASKS_FILE ||
  path === MEMORY_FILE ||
  path === HISTORY_FILE ||
  path === HISTORY_JOURNAL ||
  path === TOOL_RESULTS_DIR ||
  path.startsWith(`${TOOL_RESULTS_DIR}/`) ||
  path === RUNS_DIR ||
  path.startsWith(`${RUNS_DIR}/`)

/** Files only the history recorder (and, for `runs/`, the orchestrator) writes. */
export const isHistoryFile = (path: string): boolean =>
  path === HISTORY_FILE ||
  path === HISTORY_JOURNAL ||
  path === TOOL_RESULTS_DIR ||
  path.startsWith(`${TOOL_RESULTS_DIR}/`) ||
  path === RUNS_DIR ||
  path.startsWith(`${RUNS_DIR}/`)

export const isTempFile = (name: string): boolean => name.endsWith(TEMP_SUFFIX) || LEGACY_TEMP.test(name)

const utf8Length = (text: string) => Buffer.byteLength(text, "utf8")
const clip = (text: string) => (text.length > 120 ? `${text.slice(0, 117)}...` : text)

/** A path as written, checked: its clean form (`a/b.md`), or why it is refused. */
export const cleanPath = (path: string): Either.Either<string, PathRefused> => {
  const refuse = (reason: string) => Either.left(new PathRefused({ path: clip(path), reason }))
  if (path.length === 0) return refuse("empty path")
  if (path.includes("\u0000")) return refuse("contains a NUL byte")
  if (utf8Length(path) > MAX_PATH_BYTES) return refuse(`longer than ${MAX_PATH_BYTES} bytes`)
  if (path.startsWith("/") || path.startsWith("\\") || /^[a-zA-Z]:/.test(path))
    return refuse("absolute paths are not allowed")
  if (/^[a-z][a-z0-9+.-]*:/i.test(path)) return refuse("URLs are not paths")
  if (path.includes("\\")) return refuse("use / to separate directories")
  if (path.startsWith("~")) return refuse("~ (a home directory) is not allowed")
  if (/%[0-9a-f]{2}/i.test(path)) return refuse("percent-encoded characters are not allowed")
  const segments = path.split("/").filter((s) => s !== "" && s !== ".")
  if (segments.some((s) => s === "..")) return refuse("leaves its directory (..)")
  if (segments.length === 0) return refuse("names no file")
  if (segments.some((s) => utf8Length(s) > MAX_SEGMENT_BYTES))
    return refuse(`a path segment is longer than ${MAX_SEGMENT_BYTES} bytes`)
  return Either.right(segments.join("/"))
}

export const checkPath = (path: string): Effect.Effect<string, PathRefused> =>
  Either.match(cleanPath(path), { onLeft: Effect.fail, onRight: Effect.succeed })

export const SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/

const RESERVED = new Set([...ROOT_INDEX_FILES, TENANTS_DIR, ...GLOBAL_FILES])

/** A session id checked: one segment, the allowed characters, not a reserved name. */
export const cleanSessionId = (id: string): Either.Either<string, PathRefused> => {
  if (!SESSION_ID.test(id))
    return Either.left(
      new PathRefused({
        path: clip(id),
        reason: "a session id is 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"
      })
    )
  if (RESERVED.has(id) || isTempFile(id))
    return Either.left(new PathRefused({ path: id, reason: "the name is reserved by the data root" }))
  return Either.right(id)
}

export const checkSessionId = (id: string): Effect.Effect<string, PathRefused> =>
  Either.match(cleanSessionId(id), { onLeft: Effect.fail, onRight: Effect.succeed })

/** A global file's name: one segment at the top of the root, not the index, not hidden. */
export const cleanGlobalPath = (path: string): Either.Either<string, PathRefused> =>
  Either.flatMap(cleanPath(path), (clean) =>
    clean.includes("/")
      ? Either.left(
          new PathRefused({
            path: clip(path),
            reason:
              "a global file is a file at the top of the data root (another session's files are not reachable)"
          })
        )
      : isRootIndexFile(clean) || clean.startsWith(".")
        ? Either.left(new PathRefused({ path: clean, reason: "not a global file" }))
        : Either.right(clean)
  )
