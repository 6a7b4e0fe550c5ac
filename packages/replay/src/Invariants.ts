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
import { EXTRA_CONTEXTS, policies } from "@ctxo/compiler/Composer"
import type { PolicyName } from "@ctxo/compiler/Manifest"
import type { Format } from "@ctxo/compiler/Render"
import type { HistoryDocument, Message } from "@ctxo/history/Message"
import { textOf } from "@ctxo/history/Message"
import { defaultLimits } from "@ctxo/history/ToolResultCompressor"

export const INVARIANTS = [
  "order",
  "input-once",
  "tool-pairs",
  "compression",
  "keep-turns",
  "budget",
  "determinism",
  "context-keys",
  "compiles"
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
  compiles: "-"
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
  /** The error the tool returned (from the recording). */
  readonly recordedError?: string
  readonly excerpt: string
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
  /** Turns with archived and visible messages both (a cut inside a turn). */
  readonly splitTurns: ReadonlyArray<number>
  readonly summariesBefore: ReadonlyArray<{ readonly id: string; readonly text: string }>
  readonly summariesAfter: ReadonlyArray<{ readonly id: string; readonly text: string }>
  /** What was handed to the summarizer contained a summary (kind or text). */
  readonly summarizedSummary: boolean
}

export interface FailureEvidence extends Where {
  readonly tag: string
  readonly message: string
  /** A BudgetExceeded whose required layers alone do not fit: a clear refusal, not a bug. */
  readonly refusal: boolean
}

export interface ReplayEvidence {
  readonly session: string
  readonly model: string
  readonly points: ReadonlyArray<PointEvidence>
  readonly compactions: ReadonlyArray<CompactionEvidence>
  readonly failures: ReadonlyArray<FailureEvidence>
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
const renderedMessages = (request: unknown, format: Format): Array<RenderedMessage> => {
  if (format === "openai") {
    const messages = (request as { messages: ReadonlyArray<Record<string, unknown>> }).messages
    return messages.map((m) =>
      m.role === "tool"
        ? {
            role: "tool",
            text: "",
            calls: [],
            results: [{ id: String(m.tool_call_id), content: String(m.content) }]
          }
        : {
            role: String(m.role),
            text: typeof m.content === "string" ? m.content : "",
            calls: Array.isArray(m.tool_calls)
              ? (m.tool_calls as Array<{ id: string; function: { name: string } }>).map((c) => ({
                  id: c.id,
                  name: c.function.name
                }))
              : [],
            results: []
          }
    )
  }
  if (format === "anthropic") {
    const r = request as {
      system: string
      messages: ReadonlyArray<{ role: string; content: ReadonlyArray<Record<string, unknown>> }>
    }
    return [
      ...(r.system === "" ? [] : [{ role: "system", text: r.system, calls: [], results: [] }]),
      ...r.messages.map((m) => ({
        role: m.role,
        text: m.content
          .filter((b) => b.type === "text")
          .map((b) => String(b.text))
          .join("\n"),
        calls: m.content
          .filter((b) => b.type === "tool_use")
          .map((b) => ({ id: String(b.id), name: String(b.name) })),
        results: m.content
          .filter((b) => b.type === "tool_result")
          .map((b) => ({ id: String(b.tool_use_id), content: String(b.content) }))
      }))
    ]
  }
  // ReAct: one prompt of `[role] text` blocks; tool results are `[tool] {json}` blocks.
  const prompt = (request as { prompt: string }).prompt
  return prompt.split(/\n\n(?=\[(?:system|user|assistant|tool)\] )/).map((block) => {
    const role = /^\[(\w+)\] /.exec(block)?.[1] ?? "user"
    const text = block.slice(role.length + 3)
    return { role, text, calls: [], results: [] }
  })
}

export interface ObserveInput extends Where {
  readonly result: CompileResult
  /** The same compile run again (determinism). */
  readonly again: CompileResult
  readonly counter: Counter
  readonly window: number
  readonly systemPrompt: string
  readonly input: string
  /** The turn's number in history (a restore renumbers what follows it); none before it starts. */
  readonly historyTurn?: number
  readonly recordedErrors: ReadonlyMap<string, string>
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
  const messages = renderedMessages(result.request, format)
  const callNames = new Map<string, string>()
  for (const m of messages) for (const c of m.calls) callNames.set(c.id, c.name)
  for (const m of historyMessages)
    for (const p of m.parts) if (p._tag === "tool-call") callNames.set(p.callId, p.name)

  const sequence: Array<SequenceItem> = []
  const toolResults: Array<ToolResultMeasure> = []
  for (const m of messages) {
    for (const r of m.results) {
      sequence.push({ kind: "result", id: r.id, excerpt: clip(r.content) })
      let parsed: unknown
      try {
        parsed = JSON.parse(r.content)
      } catch {
        parsed = undefined
      }
      const tool = callNames.get(r.id) ?? "?"
      const data = isObject(parsed) ? parsed.data : undefined
      const error = isObject(parsed) && isObject(parsed.error) ? String(parsed.error.message) : undefined
      const recordedError = o.recordedErrors.get(r.id)
      toolResults.push({
        callId: r.id,
        tool,
        fields: isObject(parsed) ? Object.keys(parsed) : [],
        dataFields: isObject(data) ? Object.keys(data) : [],
        ...sizeOf(tool, data),
        ...(error === undefined ? {} : { error }),
        ...(recordedError === undefined ? {} : { recordedError }),
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
  const userTexts =
    format === "anthropic"
      ? (
          result.request as {
            messages: ReadonlyArray<{ role: string; content: ReadonlyArray<Record<string, unknown>> }>
          }
        ).messages
          .filter((m) => m.role === "user")
          .flatMap((m) => m.content.filter((b) => b.type === "text").map((b) => String(b.text)))
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
    tokens: o.counter.countMessages(chatMessagesOf(result.request as never, format)),
    available: result.report.available,
    window: o.window,
    outputReserve: result.report.outputReserve,
    systemPromptWhole:
      o.systemPrompt.trim() === "" || serialized.includes(JSON.stringify(o.systemPrompt.trim()).slice(1, -1)),
    inputWhole: input === "" || serialized.includes(JSON.stringify(input).slice(1, -1)),
    identical: serialized === JSON.stringify(o.again.request),
    contextKeys: layers.filter((l) => l._tag === "system" && l.id !== "system_prompt").map((l) => l.id)
  }
}

/** Measures a compaction from the history before and after it. */
export const observeCompaction = (o: {
  readonly where: Where
  readonly status: string
  readonly keepTurns: number
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
  return {
    ...o.where,
    status: o.status,
    keepTurns: o.keepTurns,
    liveTurnsBefore: finishedLive.size,
    keptTurns: o.plan?.keptTurns ?? [],
    archivedTurns: o.plan?.archivedTurns ?? [],
    reducedForBudget: o.plan?.reducedForBudget ?? false,
    ...(o.plan?.note === undefined ? {} : { note: o.plan.note }),
    splitTurns: [...archived].filter((t) => visible.has(t)),
    summariesBefore: o.before.compression.map((s) => ({ id: s.id, text: s.text })),
    summariesAfter: o.after.compression.map((s) => ({ id: s.id, text: s.text })),
    summarizedSummary: o.summarized.some(
      (m) => m.meta.kind === "summary" || [...previous].some((text) => textOf(m).includes(text))
    )
  }
}

// --- the rules

const at = (w: Where) => ({
  session: w.session,
  model: w.model,
  turn: w.turn,
  step: w.step,
  phase: w.phase
})

const slotOf = (policy: PolicyName, id: string) => {
  const order = policies[policy].order
  const named = order.indexOf(id as never)
  return named !== -1 ? named : order.indexOf(EXTRA_CONTEXTS)
}

const rules: Readonly<Record<Invariant, (e: ReplayEvidence) => Array<Omit<Violation, "invariant">>>> = {
  order: (e) =>
    e.points.flatMap((p) => {
      const out: Array<Omit<Violation, "invariant">> = []
      for (let i = 1; i < p.layers.length; i++) {
        const a = p.layers[i - 1]!
        const b = p.layers[i]!
        const sa = slotOf(p.policy, a)
        const sb = slotOf(p.policy, b)
        if (sb < sa || (sa === sb && b < a)) {
          out.push({
            ...at(p),
            message: `layer ${b} comes after ${a}; the ${p.policy} policy orders ${policies[p.policy].order.join(", ")}`,
            excerpt: p.layers.join(" > ")
          })
          break
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
    const limit: Readonly<Record<string, number>> = {
      read: defaultLimits.readLines,
      grep: defaultLimits.grepMatches,
      bash: defaultLimits.bashStderrLines,
      write: defaultLimits.snippetLines,
      edit: defaultLimits.snippetLines,
      multiedit: defaultLimits.snippetLines,
      ls: defaultLimits.lsEntries,
      glob: defaultLimits.globEntries
    }
    const seen = new Set<string>()
    return e.points.flatMap((p) =>
      p.toolResults.flatMap((r) => {
        // One report per result, not one per compile it appears in.
        const key = `${r.callId}`
        const problems: Array<string> = []
        const dropped = r.fields.filter((f) => f === "text" || f === "stats" || f === "context")
        if (dropped.length > 0) problems.push(`keeps ${dropped.join(", ")} (history drops them)`)
        const max = limit[toolKey(r.tool)]
        if (max !== undefined && r.size > max) problems.push(`${r.tool} keeps ${r.size} (limit ${max})`)
        if (toolKey(r.tool) === "bash" && r.stdoutSummary === false)
          problems.push("Bash keeps its stdout whole")
        if (toolKey(r.tool) === "todowrite" && r.dataFields.some((f) => f !== "recap" && f !== "readBack"))
          problems.push(`TodoWrite keeps ${r.dataFields.join(", ")} (recap only)`)
        if (r.recordedError !== undefined && r.error !== r.recordedError)
          problems.push(`the error was changed: ${clip(r.error ?? "(none)")}`)
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
      for (const s of c.summariesBefore) {
        const after = c.summariesAfter.find((x) => x.id === s.id)
        if (after === undefined || after.text !== s.text) problems.push(`summary ${s.id} was changed or lost`)
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
      if (p.tokens > p.available)
        problems.push(
          `${p.tokens} tokens counted with the model's tokenizer, over the ${p.available} available`
        )
      if (p.available > p.window - p.outputReserve)
        problems.push(
          `available ${p.available} exceeds window ${p.window} minus the output reserve ${p.outputReserve}`
        )
      if (!p.systemPromptWhole) problems.push("the system prompt is not there whole")
      if (!p.inputWhole) problems.push("the input is not there whole")
      return problems.map((message) => ({ ...at(p), message, excerpt: `layers ${p.layers.join(" > ")}` }))
    }),
  determinism: (e) =>
    e.points.flatMap((p) => {
      const problems: Array<string> = []
      if (!p.identical) problems.push("the same input compiled twice gave different bytes")
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
  compiles: (e) =>
    e.failures
      .filter((f) => !f.refusal)
      .map((f) => ({ ...at(f), message: `compile failed: ${f.tag}: ${f.message}`, excerpt: clip(f.message) }))
}

/** The violations of one invariant (or all) in a replay's evidence. */
export const check = (evidence: ReplayEvidence, invariant?: Invariant): Array<Violation> =>
  (invariant === undefined ? INVARIANTS : [invariant]).flatMap((name) =>
    rules[name](evidence).map((v) => ({ invariant: name, ...v }))
  )

/** One line per violation: session, turn, model, invariant, what, and an excerpt. */
export const formatViolation = (v: Violation): string =>
  `${v.session} turn ${v.turn}${v.step > 0 ? ` step ${v.step}` : ""}${v.phase === "retry" ? " (retry)" : ""} [${v.model}] invariant ${INVARIANT_NUMBER[v.invariant]} ${v.invariant}: ${v.message}${v.excerpt === v.message ? "" : ` | ${v.excerpt}`}`
