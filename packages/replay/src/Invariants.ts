/**
 * The invariants of design.md, checked on what a replay observed.
 *
 * Two halves, kept apart on purpose: `observe*` measures a compiled request (which layer sits
 * where, how often the input occurs, which tool calls are answered where, how big each compressed
 * tool result is, the exact token count); `check` applies the rules to those measurements. The
 * replay harness runs both; the promptfoo suites get the measurements from their provider and run
 * `check` for one invariant per assertion file, so the gate does not trust the thing it checks.
 */
import type { Counter } from "@ctxo/budget/Tokenizer"
import { type CompileResult, chatMessagesOf } from "@ctxo/compiler/Compile"
import type { PolicyName } from "@ctxo/compiler/Manifest"
import type { Format, RenderedRequest } from "@ctxo/compiler/Render"
import type { HistoryDocument, Message } from "@ctxo/history/Message"
import { textOf } from "@ctxo/history/Message"
import { get_encoding, type Tiktoken, type TiktokenEncoding } from "tiktoken"

export const INVARIANTS = [
  "order",
  "input-once",
  "tool-pairs",
  "compression",
  "keep-turns",
  "budget",
  "determinism",
  "context-keys",
  "compiles",
  "summary-coverage",
  "keep-what-fits",
  "always-present",
  "refusal-justified",
  "reminders"
] as const
export type Invariant = (typeof INVARIANTS)[number]

/** design.md's number for each invariant (context keys and compiling are the harness's own). */
export const INVARIANT_NUMBER: Readonly<Record<Invariant, string>> = {
  order: "1",
  "input-once": "2",
  "tool-pairs": "3",
  compression: "4",
  "keep-turns": "5",
  budget: "6",
  determinism: "7",
  "context-keys": "seed 003",
  compiles: "-",
  "summary-coverage": "5",
  "keep-what-fits": "5",
  "always-present": "1",
  "refusal-justified": "6",
  reminders: "2"
}

// --- expectations, written here and not read from the code they check

/** Where the context window, output cap and encoding of each profile come from (checked 2025). */
export interface ProfileLimits {
  /** The model's own encoding, for an exact recount; none: the provider publishes no tokenizer. */
  readonly encoding?: TiktokenEncoding
  readonly window: number
  /** design.md: the output reserve is 10% of the window (rounded up) unless configured. */
  readonly reserve: number
  /** Fraction an estimated count must leave free (design: estimates keep a safety margin). */
  readonly margin: number
  readonly source: string
}

/**
 * The replay profiles' limits, from the providers' model pages (not from the product's registry):
 * an eval that read the registry would agree with a wrong registry.
 */
export const PROFILE_LIMITS: Readonly<Record<string, ProfileLimits>> = {
  "gpt-4o": {
    encoding: "o200k_base",
    window: 128_000,
    reserve: 12_800,
    margin: 0,
    source: "https://platform.openai.com/docs/models/gpt-4o (128,000 context)"
  },
  "gpt-4": {
    encoding: "cl100k_base",
    window: 8_192,
    reserve: 820,
    margin: 0,
    source: "https://platform.openai.com/docs/models/gpt-4 (8,192 context)"
  },
  "gpt-3.5-turbo": {
    encoding: "cl100k_base",
    window: 16_385,
    reserve: 1_639,
    margin: 0,
    source: "https://platform.openai.com/docs/models/gpt-3.5-turbo (16,385 context)"
  },
  "claude-sonnet-4-5": {
    window: 200_000,
    reserve: 20_000,
    // No public tokenizer: counts are estimates, and an estimate keeps at least 2% free.
    margin: 0.02,
    source: "https://docs.anthropic.com/en/docs/about-claude/models/overview (200K context)"
  }
}

/** Input tokens a request may use on a profile: (window - reserve) less the margin. */
/** Seed 003's share of the available budget for the newest turns (L1, "L1_recent: 18%"). */
export const RECENT_SHARE = 0.18

export const expectedAvailable = (limits: ProfileLimits): number =>
  Math.floor((limits.window - limits.reserve) * (1 - limits.margin))

/**
 * design.md / seed 002 A3: what history keeps of each tool's result (LS and Glob: the first N
 * entries with counts, N being 20 and 10 as the seed's examples give them).
 */
export const COMPRESSION_LIMITS: Readonly<Record<string, number>> = {
  read: 500,
  grep: 5,
  bash: 20,
  write: 50,
  edit: 50,
  multiedit: 50,
  ls: 20,
  glob: 10
}

/** Any `*__context` key that no policy names goes here, sorted by key. */
const EXTRA = "*"

/**
 * The layer order of each policy, as design.md (seeds 000, 001, 002) writes it; the composer's own
 * `policies` table is what this checks, so it is not read from there.
 */
export const EXPECTED_ORDER: Readonly<Record<PolicyName, ReadonlyArray<string>>> = {
  layered: [
    "system_prompt",
    "framework__context",
    "experience__context",
    "knowledge__context",
    "todo__context",
    EXTRA,
    "compression__context",
    "checkpoint_messages",
    "important_memory__context",
    "memory__context",
    "recall__context",
    "meta__context",
    "query"
  ],
  "code-agent": [
    "system_prompt",
    "tools__context",
    "framework__context",
    "rules__context",
    "knowledge__context",
    EXTRA,
    "compression__context",
    "checkpoint_messages",
    "important_memory__context",
    "memory__context",
    "recall__context",
    "meta__context",
    "query",
    "todo__context"
  ],
  notebook: [
    "system_prompt",
    "session_prompt__context",
    "framework__context",
    "profile__context",
    "knowledge__context",
    "tree__context",
    EXTRA,
    "compression__context",
    "checkpoint_messages",
    "important_memory__context",
    "memory__context",
    "recall__context",
    "meta__context",
    "query"
  ]
}

const encoders = new Map<TiktokenEncoding, Tiktoken>()
const encoderOf = (encoding: TiktokenEncoding): Tiktoken => {
  let e = encoders.get(encoding)
  if (e === undefined) {
    e = get_encoding(encoding)
    encoders.set(encoding, e)
  }
  return e
}

/** A message as the OpenAI chat API takes it (what the recount reads). */
export interface OpenAIMessageLike {
  readonly role: string
  readonly content?: string | null | ReadonlyArray<unknown>
  readonly name?: string
  readonly tool_calls?: ReadonlyArray<{
    readonly function: { readonly name: string; readonly arguments: string }
  }>
}

/**
 * An OpenAI request's input tokens, counted again with tiktoken (WASM) in the model's own encoding.
 * Framing per OpenAI's cookbook "How to count tokens with tiktoken"
 * (https://cookbook.openai.com/examples/how_to_count_tokens_with_tiktoken): 3 tokens per request
 * (the reply is primed with `<|start|>assistant<|message|>`) and 4 per message (3 of framing plus
 * its role, one token for system, user, assistant and tool in both encodings), 1 more for a `name`.
 * Tool calls: their function name and arguments as text (the arguments are what the model reads;
 * the cookbook gives no framing for them, so none is added: this count is a lower bound there).
 */
export const recountOpenAI = (
  encoding: TiktokenEncoding,
  messages: ReadonlyArray<OpenAIMessageLike>
): number => {
  const enc = encoderOf(encoding)
  const count = (text: string) => (text === "" ? 0 : enc.encode_ordinary(text).length)
  let total = 3
  for (const m of messages) {
    total += 4
    if (typeof m.content === "string") total += count(m.content)
    else if (Array.isArray(m.content))
      for (const part of m.content)
        if (isObject(part) && typeof part.text === "string") total += count(part.text)
    if (m.name !== undefined) total += 1 + count(m.name)
    for (const call of m.tool_calls ?? []) total += count(call.function.name) + count(call.function.arguments)
  }
  return total
}

/** design.md: `@file` mentions, not preceded by a letter or digit, in order, deduplicated. */
export const expectedMentions = (input: string): Array<string> => {
  const out: Array<string> = []
  for (const m of input.matchAll(/(?<![A-Za-z0-9])@([a-zA-Z0-9/._-]+(?:\.[a-zA-Z0-9]+)?)/g)) {
    const path = m[1]!.replace(/[./]+$/, "")
    if (path !== "" && !out.includes(path)) out.push(path)
  }
  return out
}
const MAX_NAMED_MENTIONS = 5

/** CODE_LAW.md (any case) at the session's root: its text, when the policy shows rules. */
export const expectedRules = (
  policy: PolicyName,
  files: Readonly<Record<string, string>>,
  manifest: Readonly<Record<string, unknown>> | undefined
): string | undefined => {
  if (policy !== "code-agent") return undefined
  const process = isObject(manifest?.process) ? manifest.process : undefined
  if (process?.enableShareContext === false) return undefined
  const file = Object.keys(files).find((f) => !f.includes("/") && f.toLowerCase() === "code_law.md")
  const text = file === undefined ? "" : files[file]!.trim()
  return text === "" ? undefined : text
}

/** What a fixture declares for one profile: its expected refusals and a minimum of compiles. */
export interface ProfileExpectation {
  readonly minCompiles?: number | undefined
  /** Any refusal the required minimum justifies is expected (generated sessions). */
  readonly justifiedRefusals?: boolean | undefined
  readonly refusals?: ReadonlyArray<{ readonly turn: number; readonly step?: number | undefined }> | undefined
}

export interface Where {
  readonly session: string
  readonly model: string
  readonly turn: number
  /** 0: the compile for the turn's input; k: after the k-th tool result of the turn. */
  readonly step: number
  readonly phase: "input" | "step" | "retry"
}

export type SequenceItem =
  | { readonly kind: "call"; readonly ids: ReadonlyArray<string>; readonly excerpt: string }
  | { readonly kind: "result"; readonly id: string; readonly excerpt: string }
  | { readonly kind: "message"; readonly role: string; readonly excerpt: string }

export interface ToolResultMeasure {
  readonly callId: string
  readonly tool: string
  /** Top-level fields of the result as the model reads it. */
  readonly fields: ReadonlyArray<string>
  readonly dataFields: ReadonlyArray<string>
  /** Lines of Read content, Grep matches, Bash stderr tail lines, Write/Edit snippet lines, LS/Glob entries. */
  readonly size: number
  /** Bash: stdout is a one-line summary. */
  readonly stdoutSummary?: boolean
  readonly error?: string
  readonly errorCode?: string
  /** A result of the running turn: the model sees it whole (full observations), not compressed. */
  readonly running: boolean
  /** The error the tool returned (from the recording). */
  readonly recordedError?: string
  readonly recordedErrorCode?: string
  readonly excerpt: string
}

/** A stored summary and whether this request shows it. */
export interface SummaryMeasure {
  readonly id: string
  readonly fromTurn: number
  readonly toTurn: number
  readonly shown: boolean
}

export interface PointEvidence extends Where {
  readonly policy: PolicyName
  readonly format: Format
  /** Composition layer ids, in order. */
  readonly layers: ReadonlyArray<string>
  /** The first layer not found in the rendered request after the one before it, if any. */
  readonly renderedOutOfOrder?: string
  readonly input: string
  readonly queryLayers: number
  /** This turn's input messages in the composed history. */
  readonly historyInputs: number
  /** Rendered user texts that start with the input. */
  readonly renderedInputs: number
  /** Other turns in the composed history whose input is the same text. */
  readonly sameInputElsewhere: number
  /** Inputs history holds (archived too), and how many the recording has started by now. */
  readonly inputsInHistory?: number
  readonly inputsExpected?: number
  /** The layers of the same compile with a query (the prefix probe): its order is checked too. */
  readonly probeLayers?: ReadonlyArray<string>
  readonly sequence: ReadonlyArray<SequenceItem>
  readonly toolResults: ReadonlyArray<ToolResultMeasure>
  /** The rendered request counted again with the model's tokenizer. */
  readonly tokens: number
  readonly available: number
  readonly window: number
  readonly outputReserve: number
  readonly systemPromptWhole: boolean
  readonly inputWhole: boolean
  /** A second compile of the same input gave the same bytes. */
  readonly identical: boolean
  readonly contextKeys: ReadonlyArray<string>
  /** tiktoken's count in the profile's own encoding (OpenAI profiles). */
  readonly recount?: number
  /** The product's own count of its final request (its report). */
  readonly total?: number
  /** Tool calls in the request, and messages that carry them (framing the cookbook does not cover). */
  readonly toolCalls?: number
  readonly callMessages?: number
  /** The system_prompt layer is the session's system prompt as written (nothing added per run or day). */
  readonly systemPromptExact?: boolean
  readonly countMethod: string
  readonly margin: number
  /** Recompiled with a shifted clock and a fresh compile cache: the same bytes. */
  readonly identicalAcrossClocks: boolean
  /** The static prefix hash of the same compile with another query; equal when it is stable. */
  readonly prefixStable?: boolean
  /** The running turn (history's number). */
  readonly runningTurn?: number
  /** False for a map-reduce worker, planner or reducer: no earlier turns by design. */
  readonly historyExpected: boolean
  /** Every earlier finished turn history holds (archived or not). */
  readonly earlierTurns: ReadonlyArray<number>
  /** Earlier finished turns not archived by compaction. */
  readonly liveTurns: ReadonlyArray<number>
  /** Earlier turns with messages in this request. */
  readonly presentTurns: ReadonlyArray<number>
  /** Present turns with some of their live messages missing (neither whole nor reduced). */
  readonly partialTurns: ReadonlyArray<number>
  /** Present turns whose tool results were replaced (reduced). */
  readonly reducedTurns: ReadonlyArray<number>
  readonly pinnedTurns: ReadonlyArray<number>
  readonly keepTurns: number
  readonly summaries: ReadonlyArray<SummaryMeasure>
  /** The request says older summaries are kept on file. */
  readonly olderSummariesNote: boolean
  /** Turns a note in the request names as left out. */
  readonly notedTurns: ReadonlyArray<number>
  /** The newest live earlier turn left out: a lower bound of its size reduced, and what was free. */
  readonly nextOlder?: { readonly turn: number; readonly minTokens: number; readonly free: number }
  readonly rulesExpected: boolean
  readonly rulesPresent: boolean
  /** The `@file` reminder after the input: the names it lists, "and N more", and what design.md expects. */
  readonly reminder?: {
    readonly expected: ReadonlyArray<string>
    readonly named: ReadonlyArray<string>
    readonly more: number
  }
}

export interface CompactionEvidence extends Where {
  readonly status: string
  readonly keepTurns: number
  /** Finished, unarchived turns before compaction (the running one excluded). */
  readonly liveTurnsBefore: number
  readonly keptTurns: ReadonlyArray<number>
  readonly archivedTurns: ReadonlyArray<number>
  readonly reducedForBudget: boolean
  readonly note?: string
  /** The compaction said history still does not fit under the trigger after it. */
  readonly stillOver: boolean
  /** The trigger's ratio of the window (the fixture's setting, else design.md's 0.8). */
  readonly triggerRatio: number
  /** The window compaction triggers on: the fixture's `contextWindow` when smaller than the model's. */
  readonly compactionWindow?: number
  /** Turns with archived and visible messages both (a cut inside a turn). */
  readonly splitTurns: ReadonlyArray<number>
  readonly summariesBefore: ReadonlyArray<{ readonly id: string; readonly text: string }>
  readonly summariesAfter: ReadonlyArray<{ readonly id: string; readonly text: string }>
  /** What was handed to the summarizer contained a summary (kind or text). */
  readonly summarizedSummary: boolean
  /** Pinned turns this compaction archived (never allowed). */
  readonly pinnedArchived: ReadonlyArray<number>
  /** Turns newly archived by this compaction. */
  readonly newlyArchived: ReadonlyArray<number>
}

export interface FailureEvidence extends Where {
  readonly tag: string
  readonly message: string
  /** A BudgetExceeded whose required layers alone do not fit: a clear refusal, not a bug. */
  readonly refusal: boolean
  /**
   * The required minimum counted independently (system, rules, the input, the running turn with
   * its older observations compressed and the newest whole), and the tokens available.
   */
  readonly minimum?: number
  readonly available?: number
}

export interface ReplayEvidence {
  readonly session: string
  readonly model: string
  readonly points: ReadonlyArray<PointEvidence>
  readonly compactions: ReadonlyArray<CompactionEvidence>
  readonly failures: ReadonlyArray<FailureEvidence>
  /** What the fixture declares for this profile (expected refusals, minimum compiles). */
  readonly expected?: ProfileExpectation
}

export interface Violation extends Where {
  readonly invariant: Invariant
  readonly message: string
  readonly excerpt: string
}

// --- measuring

const clip = (text: string, max = 80) => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}
const lineCount = (text: unknown) =>
  typeof text === "string" && text !== "" ? text.replace(/\n$/, "").split("\n").length : 0
const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)
const toolKey = (tool: string) => {
  const key = tool.toLowerCase().replace(/[^a-z]/g, "")
  return key.endsWith("file") && key !== "file" ? key.slice(0, -4) : key
}

/** Size of a compressed tool result by its tool's rule (see ToolResultCompressor). */
const sizeOf = (tool: string, data: unknown): { size: number; stdoutSummary?: boolean } => {
  if (!isObject(data)) return { size: 0 }
  switch (toolKey(tool)) {
    case "read":
      return { size: lineCount(data.content) }
    case "grep":
      return { size: Array.isArray(data.matches) ? data.matches.length : 0 }
    case "bash":
      return {
        size: lineCount(data.stderrTail),
        stdoutSummary: typeof data.stdout === "string" && !data.stdout.includes("\n")
      }
    case "write":
      return { size: lineCount(data.snippet) }
    case "edit":
    case "multiedit":
      return {
        size: Array.isArray(data.changes)
          ? data.changes.reduce((n: number, c) => n + (isObject(c) ? lineCount(c.snippet) : 0), 0)
          : 0
      }
    case "ls":
      return { size: Array.isArray(data.entries) ? data.entries.length : 0 }
    case "glob":
      return { size: Array.isArray(data.matches) ? data.matches.length : 0 }
    default:
      return { size: 0 }
  }
}

interface RenderedMessage {
  readonly role: string
  readonly text: string
  readonly calls: ReadonlyArray<{ readonly id: string; readonly name: string }>
  readonly results: ReadonlyArray<{ readonly id: string; readonly content: string }>
}

/** The rendered request as a list of messages with their text, tool calls and tool results. */
const renderedMessages = (rendered: RenderedRequest): Array<RenderedMessage> => {
  if (rendered.format === "openai") {
    return rendered.request.messages.map((m): RenderedMessage => {
      if (m.role === "tool")
        return { role: "tool", text: "", calls: [], results: [{ id: m.tool_call_id, content: m.content }] }
      return {
        role: m.role,
        text: m.content ?? "",
        calls:
          m.role === "assistant"
            ? (m.tool_calls ?? []).map((c) => ({ id: c.id, name: c.function.name }))
            : [],
        results: []
      }
    })
  }
  if (rendered.format === "anthropic") {
    const r = rendered.request
    return [
      ...(r.system === "" ? [] : [{ role: "system", text: r.system, calls: [], results: [] }]),
      ...r.messages.map((m) => ({
        role: m.role,
        text: m.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("\n"),
        calls: m.content.flatMap((b) => (b.type === "tool_use" ? [{ id: b.id, name: b.name }] : [])),
        results: m.content.flatMap((b) =>
          b.type === "tool_result" ? [{ id: b.tool_use_id, content: b.content }] : []
        )
      }))
    ]
  }
  // ReAct: one prompt of `[role] text` blocks; tool results are `[tool] {json}` blocks.
  const prompt = rendered.request.prompt
  return prompt.split(/\n\n(?=\[(?:system|user|assistant|tool)\] )/).map((block) => {
    const role = /^\[(\w+)\] /.exec(block)?.[1] ?? "user"
    const text = block.slice(role.length + 3)
    return { role, text, calls: [], results: [] }
  })
}

export interface ObserveInput extends Where {
  readonly result: CompileResult
  /** The same compile run again (determinism): its request, null when it failed. */
  readonly again: { readonly request: CompileResult["request"] | null }
  readonly counter: Counter
  readonly window: number
  readonly systemPrompt: string
  readonly input: string
  /** The turn's number in history (a restore renumbers what follows it); none before it starts. */
  readonly historyTurn?: number
  readonly recordedErrors: ReadonlyMap<string, { readonly code?: string; readonly message: string }>
  /** The same compile with a shifted clock and a fresh compile cache (null: it failed). */
  readonly otherClock: { readonly request: CompileResult["request"] | null }
  /** The same compile with another query (undefined: not probed or failed). */
  readonly otherQuery?: Pick<CompileResult, "prefix" | "composition">
  /** The history the compile was given. */
  readonly doc?: HistoryDocument
  /** Inputs history should hold now: those before this turn, and this turn's once. */
  readonly inputsExpected?: number
  readonly keepTurns: number
  /** False for a map-reduce worker, planner or reducer (design.md: no earlier turns). */
  readonly historyExpected?: boolean
  /** CODE_LAW.md's text when the policy must show it. */
  readonly rules?: string
}

/** Measures one compiled request for every invariant. */
export const observe = (o: ObserveInput): PointEvidence => {
  const { result } = o
  const format = result.format
  const layers = result.composition.layers
  const serialized = JSON.stringify(result.request)
  // Each layer's text (history: its first message's) in the serialized request, each after the last.
  let position = 0
  let renderedOutOfOrder: string | undefined
  for (const layer of layers) {
    const probe =
      layer._tag === "history"
        ? layer.messages.map(textOf).find((t) => t.length > 0)
        : layer.text.split("\n").find((line) => line.trim().length > 0)
    if (probe === undefined) continue
    const at = serialized.indexOf(JSON.stringify(probe).slice(1, -1), position)
    if (at === -1) {
      renderedOutOfOrder ??= layer.id
      continue
    }
    position = at
  }
  const historyMessages: ReadonlyArray<Message> = layers.flatMap((l) =>
    l._tag === "history" ? l.messages : []
  )
  const inputs = historyMessages.filter((m) => m.role === "user" && m.meta.kind === "input")
  const messages = renderedMessages(result)
  const callNames = new Map<string, string>()
  const callTurns = new Map<string, number>()
  for (const m of messages) for (const c of m.calls) callNames.set(c.id, c.name)
  for (const m of historyMessages)
    for (const p of m.parts)
      if (p._tag === "tool-call") {
        callNames.set(p.callId, p.name)
        callTurns.set(p.callId, m.meta.turn)
      }

  const sequence: Array<SequenceItem> = []
  const toolResults: Array<ToolResultMeasure> = []
  for (const m of messages) {
    for (const r of m.results) {
      sequence.push({ kind: "result", id: r.id, excerpt: clip(r.content) })
      let parsed: unknown
      const placeholder =
        /^\{"status":"(?:success|error)","data":"\[[^\]]*(?:dismissed|excluded|on file)/.test(r.content)
      try {
        parsed = JSON.parse(r.content)
      } catch {
        parsed = undefined
      }
      const tool = callNames.get(r.id) ?? "?"
      const data = isObject(parsed) ? parsed.data : undefined
      const error = isObject(parsed) && isObject(parsed.error) ? String(parsed.error.message) : undefined
      const errorCode =
        isObject(parsed) && isObject(parsed.error) && typeof parsed.error.code === "string"
          ? parsed.error.code
          : undefined
      const recorded = o.recordedErrors.get(r.id)
      const recordedError = recorded?.message
      toolResults.push({
        callId: r.id,
        tool,
        running: o.historyTurn !== undefined && callTurns.get(r.id) === o.historyTurn,
        fields: isObject(parsed) ? Object.keys(parsed) : [],
        dataFields: isObject(data) ? Object.keys(data) : [],
        ...sizeOf(tool, data),
        ...(error === undefined ? {} : { error }),
        ...(errorCode === undefined ? {} : { errorCode }),
        // A placeholder (dismissed, excluded or reduced) stands for the result: not compared.
        ...(recordedError === undefined || placeholder ? {} : { recordedError }),
        ...(recorded?.code === undefined || placeholder ? {} : { recordedErrorCode: recorded.code }),
        excerpt: clip(r.content)
      })
    }
    if (m.calls.length > 0)
      sequence.push({ kind: "call", ids: m.calls.map((c) => c.id), excerpt: clip(m.text) })
    if (m.results.length === 0 && m.calls.length === 0)
      sequence.push({ kind: "message", role: m.role, excerpt: clip(m.text) })
    else if (m.results.length > 0 && m.text.trim() !== "")
      sequence.push({ kind: "message", role: m.role, excerpt: clip(m.text) })
  }
  const limits = PROFILE_LIMITS[o.model]
  const recount =
    limits?.encoding !== undefined && result.format === "openai"
      ? recountOpenAI(limits.encoding, result.request.messages)
      : undefined
  const turns = turnsEvidence(o, historyMessages, serialized, layers)
  const userTexts =
    result.format === "anthropic"
      ? result.request.messages
          .filter((m) => m.role === "user")
          .flatMap((m) => m.content.flatMap((b) => (b.type === "text" ? [b.text] : [])))
      : messages.filter((m) => m.role === "user").map((m) => m.text)
  const input = o.input
  return {
    session: o.session,
    model: o.model,
    turn: o.turn,
    step: o.step,
    phase: o.phase,
    policy: result.composition.policy,
    format,
    layers: layers.map((l) => l.id),
    ...(renderedOutOfOrder === undefined ? {} : { renderedOutOfOrder }),
    input,
    queryLayers: layers.filter((l) => l._tag === "query").length,
    historyInputs: inputs.filter((m) => m.meta.turn === o.historyTurn).length,
    renderedInputs: input === "" ? 0 : userTexts.filter((t) => t.startsWith(input)).length,
    sameInputElsewhere: inputs.filter((m) => m.meta.turn !== o.historyTurn && textOf(m) === input).length,
    sequence,
    toolResults,
    tokens: o.counter.countMessages(chatMessagesOf(result)),
    available: result.report.available,
    window: o.window,
    outputReserve: result.report.outputReserve,
    systemPromptWhole:
      o.systemPrompt.trim() === "" || serialized.includes(JSON.stringify(o.systemPrompt.trim()).slice(1, -1)),
    inputWhole: input === "" || serialized.includes(JSON.stringify(input).slice(1, -1)),
    identical: serialized === JSON.stringify(o.again.request),
    contextKeys: layers.filter((l) => l._tag === "system" && l.id !== "system_prompt").map((l) => l.id),
    ...(recount === undefined ? {} : { recount }),
    ...(result.report.total === undefined ? {} : { total: result.report.total }),
    ...callCounts(result),
    ...systemPromptExact(layers, o.systemPrompt),
    countMethod: result.report.tokenizer.method,
    margin: result.report.tokenizer.margin,
    identicalAcrossClocks: serialized === JSON.stringify(o.otherClock.request),
    ...prefixEvidence(result, o.otherQuery),
    ...(o.otherQuery === undefined ? {} : { probeLayers: o.otherQuery.composition.layers.map((l) => l.id) }),
    ...(o.doc === undefined || o.inputsExpected === undefined
      ? {}
      : {
          inputsInHistory: o.doc.messages.filter((m) => m.role === "user" && m.meta.kind === "input").length,
          inputsExpected: o.inputsExpected
        }),
    ...turns,
    historyExpected: o.historyExpected !== false,
    rulesExpected: o.rules !== undefined,
    rulesPresent:
      o.rules !== undefined &&
      layers.some((l) => l.id === "rules__context") &&
      serialized.includes(JSON.stringify(firstLine(o.rules)).slice(1, -1)),
    ...reminderEvidence(input, userTexts)
  }
}

/**
 * The static prefix with another query: the same hash, unless only the summaries shown differ (a
 * longer request leaves less room for them). Any other layer in front of history must not change.
 */
const prefixEvidence = (
  result: CompileResult,
  other: ObserveInput["otherQuery"]
): Pick<PointEvidence, "prefixStable"> => {
  if (other === undefined) return {}
  if (other.prefix.hash === result.prefix.hash) return { prefixStable: true }
  const statics = (c: CompileResult["composition"], summaries: boolean) => {
    const out: Array<string> = []
    for (const l of c.layers) {
      if (l._tag !== "system") break
      if ((l.id === "compression__context") === summaries) out.push(`${l.id}\u0000${l.text}`)
    }
    return out.join("\u0001")
  }
  const sameStatics = statics(result.composition, false) === statics(other.composition, false)
  const sameSummaries = statics(result.composition, true) === statics(other.composition, true)
  return sameStatics && !sameSummaries ? {} : { prefixStable: false }
}

const callCounts = (result: CompileResult): Pick<PointEvidence, "toolCalls" | "callMessages"> => {
  if (result.format !== "openai") return {}
  const withCalls = result.request.messages.filter(
    (m) => m.role === "assistant" && (m.tool_calls ?? []).length > 0
  )
  return {
    toolCalls: withCalls.reduce((n, m) => n + (m.role === "assistant" ? (m.tool_calls ?? []).length : 0), 0),
    callMessages: withCalls.length
  }
}

const systemPromptExact = (
  layers: CompileResult["composition"]["layers"],
  systemPrompt: string
): Pick<PointEvidence, "systemPromptExact"> => {
  const layer = layers.find((l) => l.id === "system_prompt")
  return layer === undefined || layer._tag !== "system" || systemPrompt.trim() === ""
    ? {}
    : { systemPromptExact: layer.text.trim() === systemPrompt.trim() }
}

const firstLine = (text: string) => text.split("\n").find((l) => l.trim() !== "") ?? text

/** The `@file` reminder that follows the input in the rendered request. */
const reminderEvidence = (
  input: string,
  userTexts: ReadonlyArray<string>
): Pick<PointEvidence, "reminder"> => {
  const expected = expectedMentions(input)
  if (expected.length === 0 || input === "") return {}
  // The running input is the last user text that starts with it: an earlier turn may have had the
  // same words, shown as it was then (its reminder went with its own request).
  const text = [...userTexts].reverse().find((t) => t.startsWith(input))
  const block =
    text === undefined
      ? undefined
      : /<system-reminder>([\s\S]*?)<\/system-reminder>/.exec(text.slice(input.length))
  const body = block?.[1] ?? ""
  const named = [...body.matchAll(/(?<![A-Za-z0-9])@([a-zA-Z0-9/._-]*[a-zA-Z0-9_-])/g)].map((m) => m[1]!)
  const more = Number(/and (\d+) more/.exec(body)?.[1] ?? 0)
  return { reminder: { expected, named, more } }
}

/** Which earlier turns the request shows, whole or reduced, and how the absent ones are covered. */
const turnsEvidence = (
  o: ObserveInput,
  historyMessages: ReadonlyArray<Message>,
  serialized: string,
  layers: CompileResult["composition"]["layers"]
) => {
  const doc = o.doc
  const running = o.historyTurn
  const none = {
    earlierTurns: [],
    liveTurns: [],
    presentTurns: [],
    partialTurns: [],
    reducedTurns: [],
    pinnedTurns: [],
    keepTurns: o.keepTurns,
    summaries: [],
    olderSummariesNote: false,
    notedTurns: []
  }
  if (doc === undefined) return none
  const limit = running ?? Number.POSITIVE_INFINITY
  const finished = new Set(doc.messages.filter((m) => m.meta.finished === true).map((m) => m.meta.turn))
  const earlier = new Set<number>()
  const live = new Set<number>()
  const pinned = new Set<number>()
  const docById = new Map<string, Message>()
  for (const m of doc.messages) {
    if (m.meta.turn >= limit || !finished.has(m.meta.turn)) continue
    earlier.add(m.meta.turn)
    if (m.meta.archivedBy === undefined) {
      live.add(m.meta.turn)
      docById.set(m.id, m)
    }
    if (m.meta.pinned === true && m.meta.archivedBy === undefined) pinned.add(m.meta.turn)
  }
  const shownById = new Map<string, Message>()
  const present = new Set<number>()
  for (const m of historyMessages) {
    if (m.meta.kind === "summary" || m.meta.turn >= limit || !finished.has(m.meta.turn)) continue
    present.add(m.meta.turn)
    shownById.set(m.id, m)
  }
  const partial = new Set<number>()
  const reduced = new Set<number>()
  for (const [id, m] of docById) {
    if (!present.has(m.meta.turn)) continue
    const shown = shownById.get(id)
    if (shown === undefined) {
      partial.add(m.meta.turn)
      continue
    }
    const before = m.parts.filter((p) => p._tag === "tool-result")
    const after = shown.parts.filter((p) => p._tag === "tool-result")
    if (after.length < before.length) partial.add(m.meta.turn)
    else if (
      m.meta.dismissed === undefined &&
      after.some((p, i) => JSON.stringify(p.data) !== JSON.stringify(before[i]?.data))
    )
      reduced.add(m.meta.turn)
  }
  // Summary texts are shown in compression__context or as L3 system messages.
  const shownTexts = [
    ...layers.flatMap((l) => (l._tag === "system" ? [l.text] : [])),
    ...historyMessages.filter((m) => m.role === "system").map(textOf)
  ].join("\n")
  const summaries = doc.compression.map((s) => ({
    id: s.id,
    fromTurn: s.fromTurn,
    toTurn: s.toTurn,
    shown: shownTexts.includes(s.text.trim().slice(0, 400))
  }))
  const olderSummariesNote = /older summar[a-z]* (?:is|are) kept on file/i.test(serialized)
  // A note naming left-out turns: "turns 3-7 ... left out / omitted / on file".
  const notedTurns = new Set<number>()
  const allTexts = [shownTexts, ...historyMessages.filter((m) => m.role !== "system").map(textOf)].join(
    "\n\n"
  )
  for (const text of allTexts.split(/\n{2,}/)) {
    if (!/left out|omitted|not shown|on file|dropped/i.test(text)) continue
    for (const m of text.matchAll(/turns? (\d+)(?:\s*(?:-|–|to|through)\s*(\d+))?((?:,\s*\d+)*)/gi)) {
      const from = Number(m[1])
      const to = m[2] === undefined ? from : Number(m[2])
      for (let t = from; t <= to && t - from < 10_000; t++) notedTurns.add(t)
      for (const extra of (m[3] ?? "").matchAll(/\d+/g)) notedTurns.add(Number(extra[0]))
    }
  }
  const sorted = (set: Iterable<number>) => [...set].sort((a, b) => a - b)
  // The newest live, unpinned earlier turn left out: could it have fit, reduced?
  const candidates = sorted(live).filter((t) => !pinned.has(t) && !present.has(t))
  const newestAbsent = candidates.at(-1)
  const presentUnpinned = sorted(present).filter((t) => !pinned.has(t))
  let nextOlder: PointEvidence["nextOlder"]
  if (newestAbsent !== undefined && (presentUnpinned[0] ?? Number.POSITIVE_INFINITY) > newestAbsent) {
    const limits = PROFILE_LIMITS[o.model]
    const available = limits === undefined ? o.result.report.available : expectedAvailable(limits)
    const count = (text: string) => (text === "" ? 0 : o.counter.count(text))
    let minTokens = 0
    for (const m of docById.values()) {
      if (m.meta.turn !== newestAbsent) continue
      minTokens += 4
      for (const p of m.parts) {
        if (p._tag === "text") minTokens += count(p.text)
        else if (p._tag === "tool-call") minTokens += count(p.name) + count(JSON.stringify(p.input ?? {}))
        // A placeholder names the call (its target) and where the full result is on file:
        // "[Read(src/a.ts) result — not shown to fit the budget; the full result is on file:
        // tool-results/call_1.json]" is about 24 tokens besides the call's name and target; an
        // error is kept whole (code and message).
        else minTokens += 24 + (p.error === undefined ? 0 : count(JSON.stringify(p.error)))
      }
    }
    const used = o.result.report.total ?? o.counter.countMessages(chatMessagesOf(o.result))
    // Recalled turns (seed 003 memory shares) may only have what the newest turns do not need up
    // to their own share: while the turns shown take less than that share, recall's tokens count as
    // free for them.
    const recall = layers.find((l) => l._tag === "system" && l.id === "recall__context")
    const recallTokens = recall === undefined || recall._tag !== "system" ? 0 : count(recall.text)
    const shownTokens = o.result.layers.find((l) => l.id === "checkpoint_messages")?.tokens ?? 0
    const free = available - used + (shownTokens < RECENT_SHARE * available ? recallTokens : 0)
    nextOlder = { turn: newestAbsent, minTokens, free }
  }
  return {
    ...(running === undefined ? {} : { runningTurn: running }),
    earlierTurns: sorted(earlier),
    liveTurns: sorted(live),
    presentTurns: sorted(present),
    partialTurns: sorted(partial),
    reducedTurns: sorted(reduced),
    pinnedTurns: sorted(pinned),
    keepTurns: o.keepTurns,
    summaries,
    olderSummariesNote,
    notedTurns: sorted(notedTurns),
    ...(nextOlder === undefined ? {} : { nextOlder })
  }
}

/** Measures a compaction from the history before and after it. */
export const observeCompaction = (o: {
  readonly where: Where
  readonly status: string
  readonly keepTurns: number
  readonly stillOver?: boolean
  readonly triggerRatio?: number
  readonly compactionWindow?: number
  readonly before: HistoryDocument
  readonly after: HistoryDocument
  readonly plan?: {
    readonly keptTurns: ReadonlyArray<number>
    readonly archivedTurns: ReadonlyArray<number>
    readonly reducedForBudget: boolean
    readonly note?: string
  }
  readonly summarized: ReadonlyArray<Message>
}): CompactionEvidence => {
  const finishedLive = new Set<number>()
  for (const m of o.before.messages)
    if (m.meta.archivedBy === undefined && m.meta.finished === true) finishedLive.add(m.meta.turn)
  const archived = new Set<number>()
  const visible = new Set<number>()
  for (const m of o.after.messages) (m.meta.archivedBy === undefined ? visible : archived).add(m.meta.turn)
  const previous = new Set(o.before.compression.map((s) => s.text))
  const archivedBefore = new Set(
    o.before.messages.filter((m) => m.meta.archivedBy !== undefined).map((m) => m.meta.turn)
  )
  // Turns pinned while still live before the compaction (pinning an archived turn keeps it archived).
  const pinned = new Set(
    o.before.messages
      .filter((m) => m.meta.pinned === true && m.meta.archivedBy === undefined)
      .map((m) => m.meta.turn)
  )
  return {
    ...o.where,
    status: o.status,
    keepTurns: o.keepTurns,
    liveTurnsBefore: finishedLive.size,
    keptTurns: o.plan?.keptTurns ?? [],
    archivedTurns: o.plan?.archivedTurns ?? [],
    reducedForBudget: o.plan?.reducedForBudget ?? false,
    ...(o.plan?.note === undefined ? {} : { note: o.plan.note }),
    stillOver: o.stillOver ?? false,
    // design.md: compaction triggers at 80% of the window unless the session configures another ratio.
    triggerRatio: o.triggerRatio ?? 0.8,
    ...(o.compactionWindow === undefined ? {} : { compactionWindow: o.compactionWindow }),
    splitTurns: [...archived].filter((t) => visible.has(t)),
    summariesBefore: o.before.compression.map((s) => ({ id: s.id, text: s.text })),
    summariesAfter: o.after.compression.map((s) => ({ id: s.id, text: s.text })),
    summarizedSummary: o.summarized.some(
      (m) => m.meta.kind === "summary" || [...previous].some((text) => textOf(m).includes(text))
    ),
    pinnedArchived: [...archived]
      .filter((t) => pinned.has(t) && !archivedBefore.has(t))
      .sort((a, b) => a - b),
    newlyArchived: [...archived].filter((t) => !archivedBefore.has(t)).sort((a, b) => a - b)
  }
}

// --- the rules

/** Headings every summary keeps, its goal among them (the template of design.md's compaction, seed 002 A5). */
const SUMMARY_HEADINGS = [
  "## 📌 Archived Session Summary",
  "### 🎯 Objectives & Status",
  "### 📂 File System State (Snapshot)"
]

const at = (w: Where) => ({
  session: w.session,
  model: w.model,
  turn: w.turn,
  step: w.step,
  phase: w.phase
})

const slotOf = (policy: PolicyName, id: string) => {
  const order = EXPECTED_ORDER[policy]
  const named = order.indexOf(id)
  return named !== -1 ? named : order.indexOf(EXTRA)
}

const rules: Readonly<Record<Invariant, (e: ReplayEvidence) => Array<Omit<Violation, "invariant">>>> = {
  order: (e) =>
    e.points.flatMap((p) => {
      const out: Array<Omit<Violation, "invariant">> = []
      // The compile itself, and the same compile with a query (where the query layer shows).
      for (const [layers, what] of [
        [p.layers, ""],
        [p.probeLayers ?? [], " (with a query)"]
      ] as const) {
        for (let i = 1; i < layers.length; i++) {
          const a = layers[i - 1]!
          const b = layers[i]!
          const sa = slotOf(p.policy, a)
          const sb = slotOf(p.policy, b)
          if (sb < sa || (sa === sb && b < a)) {
            out.push({
              ...at(p),
              message: `layer ${b} comes after ${a}${what}; the ${p.policy} policy orders ${EXPECTED_ORDER[p.policy].join(", ")}`,
              excerpt: layers.join(" > ")
            })
            break
          }
        }
      }
      if (p.renderedOutOfOrder !== undefined)
        out.push({
          ...at(p),
          message: `the rendered ${p.format} request does not have layer ${p.renderedOutOfOrder} where the composition puts it`,
          excerpt: p.layers.join(" > ")
        })
      return out
    }),
  "input-once": (e) =>
    e.points.flatMap((p) => {
      const composed = p.queryLayers + p.historyInputs
      const rendered = p.renderedInputs - p.sameInputElsewhere
      if (
        p.inputsInHistory !== undefined &&
        p.inputsExpected !== undefined &&
        p.inputsInHistory !== p.inputsExpected
      )
        return [
          {
            ...at(p),
            message: `history holds ${p.inputsInHistory} inputs where the recording started ${p.inputsExpected} turns (${p.phase === "retry" ? "the retry recorded the input again" : "an input recorded twice or lost"})`,
            excerpt: clip(p.input)
          }
        ]
      return composed === 1 && rendered === 1
        ? []
        : [
            {
              ...at(p),
              message: `the input occurs ${rendered} times in the rendered request (composed: ${p.queryLayers} as the query, ${p.historyInputs} in history); it must occur once`,
              excerpt: clip(p.input)
            }
          ]
    }),
  "tool-pairs": (e) =>
    e.points.flatMap((p) => {
      const problems: Array<string> = []
      const s = p.sequence
      for (let i = 0; i < s.length; i++) {
        const item = s[i]!
        if (item.kind === "call") {
          const answered = new Set<string>()
          let j = i + 1
          for (; j < s.length && s[j]!.kind === "result"; j++) answered.add((s[j] as { id: string }).id)
          const missing = item.ids.filter((id) => !answered.has(id))
          if (missing.length > 0)
            problems.push(`call ${missing.join(", ")} has no result right after it: ${item.excerpt}`)
        } else if (item.kind === "result") {
          let j = i - 1
          while (j >= 0 && s[j]!.kind === "result") j--
          const call = j >= 0 ? s[j] : undefined
          if (call?.kind !== "call" || !call.ids.includes(item.id))
            problems.push(`result ${item.id} does not follow its call: ${item.excerpt}`)
        }
      }
      return problems.slice(0, 1).map((message) => ({ ...at(p), message, excerpt: message }))
    }),
  compression: (e) => {
    const limit = COMPRESSION_LIMITS
    const seen = new Set<string>()
    return e.points.flatMap((p) =>
      p.toolResults.flatMap((r) => {
        // One report per result, not one per compile it appears in.
        const key = `${r.callId}`
        const problems: Array<string> = []
        const dropped = r.fields.filter((f) => f === "text" || f === "stats" || f === "context")
        if (dropped.length > 0) problems.push(`keeps ${dropped.join(", ")} (history drops them)`)
        // The running turn's results are its full observations: the limits are history's.
        const max = r.running ? undefined : limit[toolKey(r.tool)]
        if (max !== undefined && r.size > max) problems.push(`${r.tool} keeps ${r.size} (limit ${max})`)
        if (!r.running && toolKey(r.tool) === "bash" && r.stdoutSummary === false)
          problems.push("Bash keeps its stdout whole")
        if (
          !r.running &&
          toolKey(r.tool) === "todowrite" &&
          r.dataFields.some((f) => f !== "recap" && f !== "readBack")
        )
          problems.push(`TodoWrite keeps ${r.dataFields.join(", ")} (recap only)`)
        // A crash before the tool returned: history answers the call with `interrupted`, not the recording.
        const interrupted = r.errorCode === "interrupted"
        if (r.recordedError !== undefined && r.error !== r.recordedError && !interrupted)
          problems.push(`the error was changed: ${clip(r.error ?? "(none)")}`)
        if (r.recordedErrorCode !== undefined && r.errorCode !== r.recordedErrorCode && !interrupted)
          problems.push(`the error code ${r.recordedErrorCode} became ${r.errorCode ?? "(none)"}`)
        if (problems.length === 0 || seen.has(key)) return []
        seen.add(key)
        return [{ ...at(p), message: `tool result ${r.callId}: ${problems.join("; ")}`, excerpt: r.excerpt }]
      })
    )
  },
  "keep-turns": (e) =>
    e.compactions.flatMap((c) => {
      const problems: Array<string> = []
      const wanted = Math.min(c.keepTurns, c.liveTurnsBefore)
      if (
        (c.status === "compacted" || c.status === "fell-back") &&
        c.keptTurns.length < wanted &&
        !c.reducedForBudget
      )
        problems.push(`kept ${c.keptTurns.length} whole turns, fewer than ${wanted}, and not for the budget`)
      if (c.reducedForBudget && c.note === undefined)
        problems.push("kept fewer turns for the budget without saying so")
      if (c.splitTurns.length > 0) problems.push(`cut inside turn ${c.splitTurns.join(", ")}`)
      if (c.summarizedSummary) problems.push("a summary was compressed again")
      if (c.pinnedArchived.length > 0)
        problems.push(`pinned turn ${c.pinnedArchived.join(", ")} was archived`)
      if (
        c.newlyArchived.length > 0 &&
        c.status === "compacted" &&
        c.summariesAfter.length <= c.summariesBefore.length
      )
        problems.push(`turns ${c.newlyArchived.join(", ")} were archived but no summary was stored`)
      for (const s of c.summariesBefore) {
        const after = c.summariesAfter.find((x) => x.id === s.id)
        if (after === undefined || after.text !== s.text) problems.push(`summary ${s.id} was changed or lost`)
      }
      // A new summary follows the fixed template: its title, the goal, and the mechanical File
      // System State (a summary fitted to its room gives up milestones, never these).
      for (const s of c.summariesAfter) {
        if (c.summariesBefore.some((b) => b.id === s.id)) continue
        const missing = SUMMARY_HEADINGS.filter((h) => !s.text.includes(h))
        if (missing.length > 0)
          problems.push(`summary ${s.id} lost the template's ${missing.map((h) => `"${h}"`).join(" and ")}`)
      }
      // A compaction makes room: the turn's first request stays under the trigger and shows every
      // kept turn whole, unless the compaction said it could not (kept fewer for the budget, or
      // still over).
      const first = e.points.find((p) => p.turn === c.turn && p.phase === "input" && p.historyExpected)
      if (c.status === "compacted" && !c.reducedForBudget && !c.stillOver && first !== undefined) {
        const modelWindow = PROFILE_LIMITS[c.model]?.window ?? first.window
        const window = Math.min(c.compactionWindow ?? modelWindow, modelWindow)
        const trigger = Math.floor(c.triggerRatio * window)
        if (first.tokens > trigger)
          problems.push(
            `the compaction left no room: the turn's first request takes ${first.tokens} tokens, over the trigger (${trigger}), and the compaction did not say so`
          )
        const squeezed = c.keptTurns.filter(
          (t) => !first.presentTurns.includes(t) || first.reducedTurns.includes(t)
        )
        if (squeezed.length > 0)
          problems.push(
            `the compaction left no room: kept turn ${ranges(squeezed)} ${squeezed.length === 1 ? "is" : "are"} reduced or left out of the turn's first request`
          )
      }
      return problems.map((message) => ({
        ...at(c),
        message,
        excerpt: `kept turns ${c.keptTurns.join(",") || "none"}; archived ${c.archivedTurns.join(",") || "none"}`
      }))
    }),
  budget: (e) =>
    e.points.flatMap((p) => {
      const problems: Array<string> = []
      const limits = PROFILE_LIMITS[p.model]
      // The numbers of the eval's own table; a profile it does not know falls back to the report.
      const available = limits === undefined ? p.available : expectedAvailable(limits)
      if (p.recount !== undefined && p.recount > available)
        problems.push(`${p.recount} tokens recounted with tiktoken, over the ${available} available`)
      if (p.recount !== undefined && p.total !== undefined && p.recount > p.total)
        problems.push(
          `the request counts ${p.recount} tokens with tiktoken but ${p.total} by ctxo (undercounted)`
        )
      // ctxo may add framing for tool calls (the cookbook gives none): up to 6 per call and per
      // message with calls. More than that, and 1% besides, means another encoding was used.
      if (p.recount !== undefined && p.total !== undefined) {
        const framing = 6 * ((p.toolCalls ?? 0) + (p.callMessages ?? 0))
        if (p.total - p.recount > framing + Math.ceil(p.recount * 0.01) + 3)
          problems.push(
            `ctxo counts ${p.total} tokens where tiktoken (${PROFILE_LIMITS[p.model]?.encoding}) counts ${p.recount}: not the model's own encoding?`
          )
      }
      if (p.total !== undefined && p.total > available)
        problems.push(`the final request counts ${p.total} tokens, over the ${available} available`)
      if (p.tokens > available)
        problems.push(
          `${p.tokens} tokens counted with the model's tokenizer, over the ${available} available`
        )
      if (p.available > available)
        problems.push(
          `ctxo allows ${p.available} input tokens, more than ${available} (window ${limits?.window ?? p.window} - reserve ${limits?.reserve ?? p.outputReserve}${limits !== undefined && limits.margin > 0 ? ` less a ${limits.margin * 100}% margin` : ""})`
        )
      if (limits !== undefined && p.outputReserve < limits.reserve)
        problems.push(`the output reserve is ${p.outputReserve}, under ${limits.reserve}`)
      if (limits !== undefined && p.outputReserve > limits.window / 2)
        problems.push(`the output reserve is ${p.outputReserve}, over half the ${limits.window} window`)
      if (p.countMethod === "estimate" && p.margin < (limits?.margin ?? 0.02))
        problems.push(`an estimated count keeps a ${p.margin} margin, under ${limits?.margin ?? 0.02}`)
      if (!p.systemPromptWhole) problems.push("the system prompt is not there whole")
      if (!p.inputWhole) problems.push("the input is not there whole")
      return problems.map((message) => ({ ...at(p), message, excerpt: `layers ${p.layers.join(" > ")}` }))
    }),
  determinism: (e) =>
    e.points.flatMap((p) => {
      const problems: Array<string> = []
      if (!p.identical || !p.identicalAcrossClocks)
        problems.push(
          "the same input compiled twice (the second cold, with a fresh compile cache and a clock a year ahead) gave different bytes"
        )
      if (p.systemPromptExact === false)
        problems.push(
          "the system prompt layer is not the session's system prompt as written (something added per run or day)"
        )
      if (p.prefixStable === false)
        problems.push("the static prefix hash changed when only the query changed")
      if (p.layers.length > 0 && p.layers[0] !== "system_prompt" && p.layers.includes("system_prompt"))
        problems.push("the system prompt is not the first layer (the cached prefix)")
      return problems.map((message) => ({ ...at(p), message, excerpt: p.layers.join(" > ") }))
    }),
  "context-keys": (e) =>
    e.points.flatMap((p) => {
      const bad = p.contextKeys.filter((k) => !k.endsWith("__context"))
      return bad.length === 0
        ? []
        : [
            {
              ...at(p),
              message: `context layer ${bad.join(", ")} does not end in "__context"`,
              excerpt: p.layers.join(" > ")
            }
          ]
    }),
  compiles: (e) => {
    const out: Array<Omit<Violation, "invariant">> = e.failures
      .filter((f) => !f.refusal)
      .map((f) => ({ ...at(f), message: `compile failed: ${f.tag}: ${f.message}`, excerpt: clip(f.message) }))
    const declared = e.expected?.refusals ?? []
    for (const f of e.failures.filter((x) => x.refusal)) {
      if (
        e.expected?.justifiedRefusals === true &&
        f.minimum !== undefined &&
        f.available !== undefined &&
        f.minimum > f.available
      )
        continue
      if (declared.some((d) => d.turn === f.turn && (d.step === undefined || d.step === f.step))) continue
      out.push({
        ...at(f),
        message: "refused (BudgetExceeded), and the fixture does not declare this refusal expected",
        excerpt: clip(f.message)
      })
    }
    const where = { session: e.session, model: e.model, turn: 0, step: 0, phase: "input" as const }
    if (e.points.length === 0)
      out.push({
        ...where,
        message: `no compile at all on ${e.model} (${e.failures.length} refusals or failures)`,
        excerpt: "0 compiles"
      })
    else if (e.expected?.minCompiles !== undefined && e.points.length < e.expected.minCompiles)
      out.push({
        ...where,
        message: `${e.points.length} compiles, fewer than the ${e.expected.minCompiles} the fixture expects`,
        excerpt: `${e.failures.length} refusals or failures`
      })
    return out
  },
  "summary-coverage": (e) =>
    e.points.flatMap((p) => {
      if (!p.historyExpected) return []
      const present = new Set(p.presentTurns)
      const uncovered = p.earlierTurns.filter(
        (t) =>
          !present.has(t) &&
          !p.notedTurns.includes(t) &&
          !p.summaries.some((s) => s.shown && s.fromTurn <= t && t <= s.toTurn) &&
          !(
            p.olderSummariesNote &&
            p.summaries.some((s) => s.fromTurn <= t && t <= s.toTurn) &&
            p.summaries.some((s) => s.shown)
          )
      )
      return uncovered.length === 0
        ? []
        : [
            {
              ...at(p),
              message: `earlier turn${uncovered.length === 1 ? "" : "s"} ${ranges(uncovered)} absent with no summary or note covering ${uncovered.length === 1 ? "it" : "them"}`,
              excerpt: `shown turns ${ranges(p.presentTurns) || "none"}; summaries ${p.summaries.map((s) => `${s.fromTurn}-${s.toTurn}${s.shown ? "" : " (not shown)"}`).join(", ") || "none"}`
            }
          ]
    }),
  "keep-what-fits": (e) =>
    e.points.flatMap((p) => {
      if (!p.historyExpected) return []
      const problems: Array<string> = []
      const pinned = new Set(p.pinnedTurns)
      const present = new Set(p.presentTurns)
      const live = p.liveTurns.filter((t) => !pinned.has(t))
      const shown = live.filter((t) => present.has(t))
      const newest = live.slice(live.length - shown.length)
      if (shown.join(",") !== newest.join(","))
        problems.push(
          `history shows turns ${ranges(shown)}, not the newest ${shown.length} (${ranges(newest)})`
        )
      if (p.partialTurns.length > 0)
        problems.push(`turn ${ranges(p.partialTurns)} shown in part (neither whole nor reduced)`)
      const wanted = Math.min(p.keepTurns, live.length)
      // The size reduced is a lower-bound estimate (tool-call framing, the placeholder wording and
      // the note vary): flagged only with a 25% leeway.
      if (
        shown.length < wanted &&
        p.nextOlder !== undefined &&
        p.nextOlder.minTokens * 1.25 <= p.nextOlder.free
      )
        problems.push(
          `${shown.length} earlier turns shown, fewer than ${wanted}, while turn ${p.nextOlder.turn} (at least ${p.nextOlder.minTokens} tokens reduced) fits the ${p.nextOlder.free} free`
        )
      return problems.map((message) => ({
        ...at(p),
        message,
        excerpt: `live turns ${ranges(p.liveTurns) || "none"}; shown ${ranges(p.presentTurns) || "none"}; reduced ${ranges(p.reducedTurns) || "none"}`
      }))
    }),
  "always-present": (e) =>
    e.points.flatMap((p) => {
      const problems: Array<string> = []
      if (p.rulesExpected && !p.rulesPresent) problems.push("the rules (CODE_LAW.md) are missing")
      const missing = p.pinnedTurns.filter((t) => !p.presentTurns.includes(t))
      if (missing.length > 0) problems.push(`pinned turn ${missing.join(", ")} is missing`)
      return problems.map((message) => ({ ...at(p), message, excerpt: p.layers.join(" > ") }))
    }),
  "refusal-justified": (e) =>
    e.failures
      .filter((f) => f.refusal && f.minimum !== undefined && f.available !== undefined)
      .filter((f) => f.minimum! <= f.available!)
      .map((f) => ({
        ...at(f),
        message: `refused, but the required minimum (system, rules, input, the running turn with older observations compressed) is ${f.minimum} tokens of ${f.available} available`,
        excerpt: clip(f.message)
      })),
  reminders: (e) => {
    const seen = new Set<string>()
    return e.points.flatMap((p) => {
      const r = p.reminder
      if (r === undefined || seen.has(`${p.turn}`)) return []
      const problems: Array<string> = []
      const want = r.expected.slice(0, MAX_NAMED_MENTIONS)
      const more = r.expected.length - want.length
      if (r.named.length === 0)
        problems.push("no <system-reminder> naming the mentioned files follows the input")
      else {
        if (r.named.length > MAX_NAMED_MENTIONS)
          problems.push(`the reminder names ${r.named.length} files (at most 5)`)
        if (new Set(r.named).size !== r.named.length) problems.push("the reminder names a file twice")
        if (r.named.join(",") !== want.join(","))
          problems.push(`the reminder names ${r.named.join(", ")}; expected ${want.join(", ")}`)
        if (r.more !== more) problems.push(`the reminder says ${r.more} more, expected ${more}`)
      }
      if (problems.length === 0) return []
      seen.add(`${p.turn}`)
      return [{ ...at(p), message: problems.join("; "), excerpt: clip(p.input) }]
    })
  }
}

/** "3-7, 9" from [3, 4, 5, 6, 7, 9]. */
const ranges = (turns: ReadonlyArray<number>): string => {
  const out: Array<string> = []
  let i = 0
  while (i < turns.length) {
    let j = i
    while (j + 1 < turns.length && turns[j + 1] === turns[j]! + 1) j++
    out.push(j === i ? `${turns[i]}` : `${turns[i]}-${turns[j]}`)
    i = j + 1
  }
  return out.join(", ")
}

/** The violations of one invariant (or all) in a replay's evidence. */
export const check = (evidence: ReplayEvidence, invariant?: Invariant): Array<Violation> =>
  (invariant === undefined ? INVARIANTS : [invariant]).flatMap((name) =>
    rules[name](evidence).map((v) => ({ invariant: name, ...v }))
  )

/** One line per violation: session, turn, model, invariant, what, and an excerpt. */
export const formatViolation = (v: Violation): string =>
  `${v.session} turn ${v.turn}${v.step > 0 ? ` step ${v.step}` : ""}${v.phase === "retry" ? " (retry)" : ""} [${v.model}] invariant ${INVARIANT_NUMBER[v.invariant]} ${v.invariant}: ${v.message}${v.excerpt === v.message ? "" : ` | ${v.excerpt}`}`

/**
 * The smallest request that can still answer the running turn, counted independently: the system
 * prompt, the rules, the input, and the running turn's steps with its older observations in their
 * compressed form and the newest whole (`newestFull`). A refusal is justified only when this does
 * not fit. OpenAI profiles are recounted with tiktoken; others with the given (estimating) counter.
 */
export const requiredMinimum = (o: {
  readonly model: string
  readonly counter: Counter
  readonly systemPrompt: string
  readonly rules?: string
  readonly input: string
  readonly doc: HistoryDocument
  readonly newestFull?: { readonly callId: string; readonly result: unknown }
}): { readonly minimum: number; readonly available: number } | undefined => {
  const limits = PROFILE_LIMITS[o.model]
  if (limits === undefined) return undefined
  const last = o.doc.messages.at(-1)
  const runningTurn =
    last !== undefined &&
    !o.doc.messages.some((m) => m.meta.turn === last.meta.turn && m.meta.finished === true)
      ? last.meta.turn
      : undefined
  const running = o.doc.messages.filter(
    (m) => runningTurn !== undefined && m.meta.turn === runningTurn && m.meta.archivedBy === undefined
  )
  const messages: Array<OpenAIMessageLike> = [{ role: "system", content: o.systemPrompt.trim() }]
  if (o.rules !== undefined) messages.push({ role: "system", content: o.rules })
  // Pinned turns are required context too (compaction never archives them, every compile shows
  // them whole): counted as history keeps them, tool results compressed.
  const pinned = new Set(
    o.doc.messages
      .filter((m) => m.meta.pinned === true && m.meta.turn !== runningTurn)
      .map((m) => m.meta.turn)
  )
  /** A history message as the request shows it (the newest result full when `newestFull` names it). */
  const push = (m: HistoryDocument["messages"][number]) => {
    if (m.role === "tool") {
      for (const p of m.parts) {
        if (p._tag !== "tool-result") continue
        const full = o.newestFull?.callId === p.callId ? o.newestFull.result : undefined
        const shown = isObject(full)
          ? { status: full.status, data: full.data, error: full.error }
          : { status: p.status, data: p.data, error: p.error }
        messages.push({ role: "tool", content: JSON.stringify(shown) })
      }
      return
    }
    const calls = m.parts.flatMap((p) =>
      p._tag === "tool-call" ? [{ function: { name: p.name, arguments: JSON.stringify(p.input ?? {}) } }] : []
    )
    messages.push({ role: m.role, content: textOf(m), ...(calls.length === 0 ? {} : { tool_calls: calls }) })
  }
  for (const m of o.doc.messages) if (pinned.has(m.meta.turn) && m.meta.archivedBy === undefined) push(m)
  if (!running.some((m) => m.meta.kind === "input")) messages.push({ role: "user", content: o.input })
  for (const m of running) push(m)
  const minimum =
    limits.encoding !== undefined
      ? recountOpenAI(limits.encoding, messages)
      : o.counter.countMessages(
          messages.map((m) => ({
            role: m.role as "system",
            content: typeof m.content === "string" ? m.content : "",
            ...(m.tool_calls === undefined
              ? {}
              : {
                  toolCalls: m.tool_calls.map((c) => ({
                    name: c.function.name,
                    arguments: c.function.arguments
                  }))
                })
          }))
        )
  return { minimum, available: expectedAvailable(limits) }
}
