/**
 * The composer (seed 001): one pure function of (policy, system prompt, contexts, checkpoint
 * messages, query). It never sees raw state and never writes any. Ordering lives here alone, as
 * data: a policy is the order of its slots, static layers first so the prefix stays stable for
 * provider prompt caching.
 *
 * Process rules: a map-reduce worker, planner or reducer gets no checkpoint messages; with
 * `enableShareContext` off (the map worker's default) only `framework__context` is injected, plus
 * `knowledge__context` when asked for. The agent's system prompt is its own: it is passed as
 * `systemPrompt` and never accepted as a shared context. The query enters by one path only.
 */
import type { Message } from "@ctxo/history/Message"
import { textOf } from "@ctxo/history/Message"
import { Either } from "effect"
import { DuplicateInput, InvalidContextKey } from "./CompilerErrors.ts"
import type { PolicyName, ProcessRole } from "./Manifest.ts"
import type { ToolSpec } from "./ToolSelection.ts"

/** Where contexts the policy does not name go: after the named static contexts, sorted by key. */
export const EXTRA_CONTEXTS = "extra_contexts"

export type Slot =
  | "system_prompt"
  | "checkpoint_messages"
  | "query"
  | typeof EXTRA_CONTEXTS
  | `${string}__context`

export interface Policy {
  readonly name: PolicyName
  readonly order: ReadonlyArray<Slot>
}

export const policies: Readonly<Record<PolicyName, Policy>> = {
  // seed 001: system prompt, framework, experience, knowledge, todo, compression, history, query.
  layered: {
    name: "layered",
    order: [
      "system_prompt",
      "framework__context",
      "experience__context",
      "knowledge__context",
      "todo__context",
      EXTRA_CONTEXTS,
      "compression__context",
      "checkpoint_messages",
      "important_memory__context",
      "memory__context",
      "recall__context",
      "meta__context",
      "query"
    ]
  },
  // seed 002 A1: L1 system + tools, L2 rules (CODE_LAW.md), L3 history with summaries, the input, the todo recap.
  "code-agent": {
    name: "code-agent",
    order: [
      "system_prompt",
      "tools__context",
      "framework__context",
      "rules__context",
      "knowledge__context",
      EXTRA_CONTEXTS,
      "compression__context",
      "checkpoint_messages",
      "important_memory__context",
      "memory__context",
      "recall__context",
      "meta__context",
      "query",
      "todo__context"
    ]
  },
  // seed 000: global + session system prompts, selected profile blocks, history, query with references.
  notebook: {
    name: "notebook",
    order: [
      "system_prompt",
      "session_prompt__context",
      "framework__context",
      "profile__context",
      "knowledge__context",
      "tree__context",
      EXTRA_CONTEXTS,
      "compression__context",
      "checkpoint_messages",
      "important_memory__context",
      "memory__context",
      "recall__context",
      "meta__context",
      "query"
    ]
  }
}

export interface ProcessOptions {
  readonly role?: ProcessRole
  /** Default: on, except for a map-reduce worker. */
  readonly enableShareContext?: boolean
  /** With sharing off, still inject `knowledge__context`. */
  readonly knowledge?: boolean
}

/** The process rules: a map-reduce role gets no earlier turns; sharing is off for a map worker by default. */
export const processRules = (
  process:
    | { readonly role?: ProcessRole | undefined; readonly enableShareContext?: boolean | undefined }
    | undefined
) => {
  const role = process?.role ?? "agent"
  return {
    role,
    showsHistory: role === "agent",
    shares: process?.enableShareContext ?? role !== "map-worker"
  }
}

export interface ComposeInput {
  readonly policy: PolicyName | Policy
  readonly systemPrompt: string
  readonly contexts: Readonly<Record<string, string>>
  readonly checkpointMessages: ReadonlyArray<Message>
  /**
   * The turn being answered (its input and steps are in `checkpointMessages`): a map-reduce role
   * gets no earlier turns, but the turn it is answering stays.
   */
  readonly runningTurn?: number
  readonly query?: string
  readonly process?: ProcessOptions
  /** The tool definitions the request carries (the tools source's choice), in order. */
  readonly tools?: ReadonlyArray<ToolSpec>
}

export type ComposedLayer =
  | { readonly _tag: "system"; readonly id: string; readonly text: string }
  | {
      readonly _tag: "history"
      readonly id: "checkpoint_messages"
      readonly messages: ReadonlyArray<Message>
    }
  | { readonly _tag: "query"; readonly id: "query"; readonly text: string }

export interface Composition {
  readonly policy: PolicyName
  readonly layers: ReadonlyArray<ComposedLayer>
  /** The tool definitions the request carries (none: the request offers no tools). */
  readonly tools?: ReadonlyArray<ToolSpec>
}

const PRIVATE_KEYS = new Set(["system_prompt__context", "agent_system_prompt__context"])

export const compose = (
  input: ComposeInput
): Either.Either<Composition, InvalidContextKey | DuplicateInput> => {
  const policy = typeof input.policy === "string" ? policies[input.policy] : input.policy
  const { showsHistory, shares: share } = processRules(input.process)

  for (const key of Object.keys(input.contexts)) {
    if (!key.endsWith("__context")) {
      return Either.left(new InvalidContextKey({ key, reason: 'context keys end in "__context"' }))
    }
    if (PRIVATE_KEYS.has(key)) {
      return Either.left(
        new InvalidContextKey({
          key,
          reason: "an agent's system prompt is passed as systemPrompt and never shared"
        })
      )
    }
  }
  const allowed = (key: string) =>
    share ||
    key === "framework__context" ||
    (key === "knowledge__context" && input.process?.knowledge === true)
  const contexts = Object.entries(input.contexts).filter(([key, text]) => allowed(key) && text.trim() !== "")
  const named = new Set<string>(policy.order)
  const history = showsHistory
    ? input.checkpointMessages
    : input.runningTurn === undefined
      ? []
      : input.checkpointMessages.filter((m) => m.meta.turn === input.runningTurn)

  if (input.query !== undefined) {
    const lastUser = [...history].reverse().find((m) => m.role === "user")
    if (lastUser !== undefined && lastUser.meta.kind === "input" && textOf(lastUser) === input.query) {
      const after = history.slice(history.indexOf(lastUser) + 1)
      if (!after.some((m) => m.meta.finished === true))
        return Either.left(new DuplicateInput({ messageId: lastUser.id }))
    }
  }

  const layers: Array<ComposedLayer> = []
  for (const slot of policy.order) {
    if (slot === "system_prompt") {
      if (input.systemPrompt.trim() !== "")
        layers.push({ _tag: "system", id: "system_prompt", text: input.systemPrompt })
    } else if (slot === "checkpoint_messages") {
      if (history.length > 0) layers.push({ _tag: "history", id: "checkpoint_messages", messages: history })
    } else if (slot === "query") {
      if (input.query !== undefined && input.query !== "")
        layers.push({ _tag: "query", id: "query", text: input.query })
    } else if (slot === EXTRA_CONTEXTS) {
      for (const [key, text] of contexts
        .filter(([k]) => !named.has(k))
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
        layers.push({ _tag: "system", id: key, text })
      }
    } else {
      const found = contexts.find(([key]) => key === slot)
      if (found !== undefined) layers.push({ _tag: "system", id: slot, text: found[1] })
    }
  }
  return Either.right({
    policy: policy.name,
    layers,
    ...(input.tools === undefined || input.tools.length === 0 ? {} : { tools: input.tools })
  })
}
