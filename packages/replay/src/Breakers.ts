/**
 * Deliberately broken compilers and compactors, swapped in through layers to prove that the
 * checks catch each kind of regression (the gate must fail, naming the right invariant).
 * Never used outside tests and `CTXO_EVAL_BREAK` runs of the suites.
 */
import type { CompileResult } from "@ctxo/compiler/Compile"
import { compile } from "@ctxo/compiler/Compile"
import { compact } from "@ctxo/history/Compaction"
import { HistoryStore } from "@ctxo/history/HistoryStore"
import { Effect, Layer } from "effect"
import type { Invariant } from "./Invariants.ts"
import {
  type CompilerService,
  ContextCompiler,
  compactorLive,
  compilerLive,
  HistoryCompactor
} from "./Replay.ts"

type Edit = (messages: Array<Record<string, unknown>>) => Array<Record<string, unknown>>

const editRequest = (f: Edit) => {
  // A breaker may leave messages malformed on purpose: the edit is untyped by design.
  const edit = <M>(messages: ReadonlyArray<M>) =>
    f([...messages] as unknown as Array<Record<string, unknown>>) as unknown as ReadonlyArray<M>
  return Layer.succeed(ContextCompiler, {
    compile: (options) =>
      Effect.map(compile(options), (result): CompileResult => {
        switch (result.format) {
          case "openai":
            return { ...result, request: { ...result.request, messages: edit(result.request.messages) } }
          case "anthropic":
            return { ...result, request: { ...result.request, messages: edit(result.request.messages) } }
          case "react":
            return result
        }
      })
  } satisfies CompilerService)
}

/** Each breaker and the invariant that must catch it. */
export const breakers = {
  // The first two layers trade places (a policy that reorders).
  "order-swapped": {
    catches: "order" as Invariant,
    layer: editRequest((m) => (m.length > 2 ? [m[1]!, m[0]!, ...m.slice(2)] : m))
  },
  // The input is sent twice.
  "query-duplicated": {
    catches: "input-once" as Invariant,
    layer: editRequest((m) => {
      const last = [...m].reverse().find((x) => x.role === "user")
      return last === undefined ? m : [...m, { ...last }]
    })
  },
  // A tool result goes missing.
  "tool-result-dropped": {
    catches: "tool-pairs" as Invariant,
    layer: editRequest((m) => {
      const i = m.findIndex(
        (x) =>
          x.role === "tool" ||
          (Array.isArray(x.content) && x.content.some((b: { type?: string }) => b.type === "tool_result"))
      )
      return i === -1 ? m : [...m.slice(0, i), ...m.slice(i + 1)]
    })
  },
  // More than the model takes.
  "budget-exceeded": {
    catches: "budget" as Invariant,
    layer: editRequest((m) => [...m, { role: "user", content: "pad ".repeat(150_000) }])
  },
  // Compaction hands the previous summaries to the summarizer again and rewrites them.
  "summary-recompressed": {
    catches: "keep-turns" as Invariant,
    layer: Layer.succeed(HistoryCompactor, {
      compact: (options) =>
        Effect.gen(function* () {
          const result = yield* compact(options)
          if (result.status !== "compacted") return result
          const store = yield* HistoryStore
          yield* store.modify(options.sessionId, (doc) =>
            Effect.succeed([
              undefined,
              {
                ...doc,
                compression: doc.compression.map((s, i) =>
                  i === doc.compression.length - 1
                    ? s
                    : { ...s, text: `${s.text.slice(0, 40)} (compressed again)` }
                )
              }
            ] as const)
          )
          return result
        })
    })
  },
  // Compaction keeps fewer turns than it must.
  "fewer-turns-kept": {
    catches: "keep-turns" as Invariant,
    layer: Layer.succeed(HistoryCompactor, {
      compact: (options) =>
        compact({
          ...options,
          settings: { ...options.settings, keepTurns: Math.max(0, (options.settings?.keepTurns ?? 10) - 2) }
        }).pipe(
          Effect.map((result) =>
            result.plan === undefined
              ? result
              : { ...result, plan: { ...result.plan, reducedForBudget: false } }
          )
        )
    })
  }
} as const

export type BreakerName = keyof typeof breakers

/** The live layers with one piece swapped for a broken one. */
export const brokenLayer = (name: BreakerName) => {
  const breaker = breakers[name]
  return breakers[name].catches === "keep-turns"
    ? Layer.merge(compilerLive, breaker.layer as Layer.Layer<HistoryCompactor>)
    : Layer.merge(breaker.layer as Layer.Layer<ContextCompiler>, compactorLive)
}
