/**
 * Real traffic as regression tests: a session's history, files and manifest written out as a
 * recorded session (`ctxo.session/v1`) that `ctxo replay` and `pnpm eval` run.
 *
 * Tool results are the ones the tools returned: when history kept a compressed result, the full one
 * it saved beside it (`tool-results/<call>.json`) is used. Summaries are not recorded (a replay
 * writes its own when compaction fires); the files the recorder owns (messages.json, tool-results/)
 * are left out of `files`.
 */
import type { HistoryDocument, Message } from "@ctxo/history/Message"
import { textOf } from "@ctxo/history/Message"
import type { RecordedSession, Step, Turn } from "./Session.ts"
import { SESSION_FORMAT, type ToolResult as ToolResultSchema } from "./Session.ts"

type ToolResult = typeof ToolResultSchema.Type

export interface RecordInput {
  readonly id: string
  readonly description: string
  readonly history: HistoryDocument
  /** The session's files by path (messages.json and tool-results/ are skipped). */
  readonly files: Readonly<Record<string, string>>
  /** The global system prompt the session compiles with. */
  readonly systemPrompt: string
  readonly profile?: string
  /** Full tool results by call id (what the recorder saved when it compressed one). */
  readonly fullResults?: ReadonlyMap<string, unknown>
  readonly tenant?: string
  readonly now?: string
}

const POLICIES = new Set(["layered", "code-agent", "notebook"])

export const toRecordedSession = (input: RecordInput): RecordedSession => {
  const files: Record<string, string> = {}
  for (const [path, text] of Object.entries(input.files))
    if (path !== "messages.json" && path !== "context-config.json" && !path.startsWith("tool-results/"))
      files[path] = text
  let manifest: Record<string, unknown> = {}
  try {
    manifest = JSON.parse(input.files["context-config.json"] ?? "{}") as Record<string, unknown>
  } catch {
    manifest = {}
  }
  const {
    policy,
    model,
    systemPrompt: _prompt,
    query: _query,
    references: _refs,
    $schema: _schema,
    chatHistory: _history,
    ...rest
  } = manifest
  const sessionPrompts = Array.isArray(_prompt)
    ? (_prompt as Array<{ type?: string; file?: string }>).filter((p) => p.type === "session")
    : []

  const turns: Array<Turn> = []
  const byTurn = new Map<number, Array<Message>>()
  for (const m of input.history.messages) byTurn.set(m.meta.turn, [...(byTurn.get(m.meta.turn) ?? []), m])
  for (const [, messages] of [...byTurn].sort(([a], [b]) => a - b)) {
    const user = messages.find((m) => m.meta.kind === "input")
    if (user === undefined) continue
    const steps: Array<Step> = []
    for (const m of messages) {
      if (m === user) continue
      if (m.role === "assistant") {
        const text = textOf(m)
        const calls = m.parts.filter((p) => p._tag === "tool-call")
        if (text !== "" || calls.length === 0) steps.push({ type: "assistant", text })
        for (const c of calls) steps.push({ type: "tool_call", id: c.callId, name: c.name, input: c.input })
      } else if (m.role === "tool") {
        for (const p of m.parts) {
          if (p._tag !== "tool-result") continue
          const full = input.fullResults?.get(p.callId) as Record<string, unknown> | undefined
          const result: ToolResult =
            full !== undefined && typeof full === "object" && typeof full.status === "string"
              ? (full as unknown as ToolResult)
              : {
                  status: p.status,
                  ...(p.data === undefined ? {} : { data: p.data }),
                  ...(p.error === undefined ? {} : { error: p.error })
                }
          steps.push({ type: "tool_result", callId: p.callId, name: p.name, result })
        }
      }
    }
    turns.push({
      user: textOf(user),
      steps,
      ...(user.meta.inputKey === undefined ? {} : { inputKey: user.meta.inputKey })
    })
  }
  return {
    format: SESSION_FORMAT,
    id: input.id,
    description: input.description,
    policy:
      typeof policy === "string" && POLICIES.has(policy) ? (policy as RecordedSession["policy"]) : "notebook",
    model: typeof model === "string" ? model : "gpt-4o",
    systemPrompt: input.systemPrompt,
    files,
    ...(input.profile === undefined ? {} : { profile: input.profile }),
    manifest: {
      ...rest,
      ...(sessionPrompts.length > 0
        ? { systemPrompt: [{ type: "global", file: "system-prompt.md" }, ...sessionPrompts] }
        : {})
    },
    turns,
    ...(input.now === undefined ? {} : { recordedAt: input.now }),
    ...(input.tenant === undefined ? {} : { tenant: input.tenant })
  }
}
