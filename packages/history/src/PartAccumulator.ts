/**
 * Accumulates a model's streamed events into message parts (seed 000, "Part Accumulator"), the
 * same on the server and in a browser: consecutive text deltas merge into one text part; a tool
 * call or a tool result ends the merge, so text after it starts a new part. No Node-only APIs.
 */
import type { Message, Part, ToolError } from "./Message.ts"

export type StreamEvent =
  | { readonly type: "text-delta"; readonly delta: string }
  | { readonly type: "tool-call"; readonly callId: string; readonly name: string; readonly input: unknown }
  | {
      readonly type: "tool-result"
      readonly callId: string
      readonly name: string
      readonly status: "success" | "error"
      readonly data?: unknown
      readonly error?: ToolError
    }

export type ToolEvent = Extract<StreamEvent, { type: "tool-call" | "tool-result" }>

export interface PartAccumulator {
  readonly push: (event: StreamEvent) => void
  readonly getParts: () => ReadonlyArray<Part>
  readonly getText: () => string
  readonly getToolEvents: () => ReadonlyArray<ToolEvent>
  /** The assistant message built so far, or null when nothing was streamed. */
  readonly toMessage: (sessionId: string, turn?: number) => Message | null
}

export const createPartAccumulator = (): PartAccumulator => {
  const parts: Array<Part> = []
  const toolEvents: Array<ToolEvent> = []
  let open: { text: string } | undefined
  let index = -1
  return {
    push: (event) => {
      switch (event.type) {
        case "text-delta": {
          if (event.delta === "") return
          if (open === undefined) {
            open = { text: event.delta }
            index = parts.push({ _tag: "text", text: open.text }) - 1
          } else {
            open.text += event.delta
            parts[index] = { _tag: "text", text: open.text }
          }
          return
        }
        case "tool-call":
          open = undefined
          toolEvents.push(event)
          parts.push({ _tag: "tool-call", callId: event.callId, name: event.name, input: event.input })
          return
        case "tool-result":
          open = undefined
          toolEvents.push(event)
          parts.push({
            _tag: "tool-result",
            callId: event.callId,
            name: event.name,
            status: event.status,
            ...(event.data === undefined ? {} : { data: event.data }),
            ...(event.error === undefined ? {} : { error: event.error })
          })
          return
      }
    },
    getParts: () => [...parts],
    getText: () =>
      parts
        .filter((p) => p._tag === "text")
        .map((p) => p.text)
        .join(""),
    getToolEvents: () => [...toolEvents],
    toMessage: (sessionId, turn = 0) =>
      parts.length === 0
        ? null
        : {
            id: `${sessionId}-${globalThis.crypto.randomUUID()}`,
            role: "assistant",
            parts: [...parts],
            meta: { turn }
          }
  }
}
