/**
 * Stage "format": the kept units composed in the policy's order (`Composer.compose`) and rendered
 * for the provider. The budget counts many candidate requests while it selects; the last
 * composition and each rendering are kept, so the request counted last is the request returned.
 */
import type { Message } from "@ctxo/history/Message"
import type { Turn } from "@ctxo/history/Turns"
import type { Either } from "effect"
import type { DuplicateInput, InvalidContextKey } from "../CompilerErrors.ts"
import type { Composition } from "../Composer.ts"
import { compose } from "../Composer.ts"
import type { Manifest } from "../Manifest.ts"
import type { Format, RenderedRequest } from "../Render.ts"
import { render } from "../Render.ts"
import type { ToolSpec } from "../ToolSelection.ts"
import type { CompileUnit } from "./units.ts"

export interface Formatter {
  readonly compose: (
    included: ReadonlyArray<CompileUnit>
  ) => Either.Either<Composition, InvalidContextKey | DuplicateInput>
  readonly render: (composition: Composition) => RenderedRequest
}

export const makeFormatter = (options: {
  readonly manifest: Manifest
  readonly systemPrompt: string
  /** The new input ("" when a running turn is answered instead). */
  readonly input: string
  readonly format: Format
}): Formatter => {
  const { manifest, systemPrompt, input, format } = options
  const composeFresh = (included: ReadonlyArray<CompileUnit>) => {
    // A key's units in document order where the source gave one (relevance chose them).
    const byKey = new Map<string, Array<Extract<CompileUnit, { readonly kind: "context" }>>>()
    for (const u of included) {
      if (u.kind !== "context") continue
      const list = byKey.get(u.key)
      if (list === undefined) byKey.set(u.key, [u])
      else list.push(u)
    }
    const contexts: Record<string, string> = {}
    for (const [key, units] of byKey) {
      const ordered = units.every((u) => u.position !== undefined)
        ? [...units].sort((a, b) => a.position! - b.position!)
        : units
      contexts[key] = ordered.map((u) => u.text).join("\n\n")
    }
    // The kept turns, oldest first, the running one among them, and the tools: one pass over what
    // was kept. The budget most often orders turns one way or the other (the plan hands recent
    // history newest first): then they are not sorted again, only reversed.
    const keptTurns: Array<Turn> = []
    let ascending = true
    let descending = true
    let running: Turn | undefined
    const tools: Array<ToolSpec> = []
    for (const u of included) {
      if (u.kind === "turn") {
        const previous = keptTurns[keptTurns.length - 1]
        if (previous !== undefined) {
          if (previous.turn > u.turn.turn) ascending = false
          else descending = false
        }
        keptTurns.push(u.turn)
        if (u.running === true && running === undefined) running = u.turn
      } else if (u.kind === "tool") tools.push(u.spec)
    }
    if (!ascending) {
      if (descending) keptTurns.reverse()
      else keptTurns.sort((a, b) => a.turn - b.turn)
    }
    const checkpointMessages: Array<Message> = []
    for (const t of keptTurns) for (const m of t.messages) checkpointMessages.push(m)
    return compose({
      policy: manifest.policy,
      ...(tools.length === 0 ? {} : { tools }),
      systemPrompt,
      contexts,
      checkpointMessages,
      ...(running === undefined ? {} : { runningTurn: running.turn }),
      ...(input === "" ? {} : { query: input }),
      process: {
        role: manifest.process.role,
        knowledge: manifest.process.knowledge,
        ...(manifest.process.enableShareContext === undefined
          ? {}
          : { enableShareContext: manifest.process.enableShareContext })
      }
    })
  }
  let last:
    | { readonly included: ReadonlyArray<CompileUnit>; readonly composed: ReturnType<typeof compose> }
    | undefined
  const renderings = new WeakMap<Composition, RenderedRequest>()
  return {
    compose: (included) => {
      if (
        last !== undefined &&
        last.included.length === included.length &&
        last.included.every((u, i) => u === included[i])
      )
        return last.composed
      const composed = composeFresh(included)
      last = { included, composed }
      return composed
    },
    render: (composition) => {
      let rendered = renderings.get(composition)
      if (rendered === undefined) {
        rendered = render(composition, format)
        renderings.set(composition, rendered)
      }
      return rendered
    }
  }
}
