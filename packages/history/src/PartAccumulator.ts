/**
 * Accumulates a model's streamed events into message parts (seed 000, "Part Accumulator"), the
 * same on the server and in a browser: consecutive text deltas merge into one text part; a tool
 * call or a tool result ends the merge, so text after it starts a new part. No Node-only APIs.
 *
 * The gateway's chat stream (`POST /api/sessions/:id/chat`) carries its events in the wire shape
 * (`ChatPartEvent`: `text`, `id`, `arguments` as JSON text, the tool's whole `result`);
 * `pushChatEvent` feeds them in. The gateway accumulates each turn it streams this way (its `done`
 * event carries the parts) and so does the workbench page, with this one module.
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

/** The chat stream's events that make parts, as the gateway sends them (`@ctxo/api/ChatEvent`). */
export type ChatPartEvent =
  | { readonly type: "text-delta"; readonly text: string }
  | { readonly type: "tool-call"; readonly id: string; readonly name: string; readonly arguments: string }
  | { readonly type: "tool-result"; readonly id: string; readonly name: string; readonly result: unknown }

/** Whether a chat event makes parts (the others, `turn`, `usage`, `done` ..., do not). */
export const isChatPartEvent = (event: { readonly type: string }): event is ChatPartEvent =>
  event.type === "text-delta" || event.type === "tool-call" || event.type === "tool-result"

/** A tool call's arguments as recorded: the JSON they are, `{}` for none, else `{ raw }`. */
export const parseToolArguments = (text: string): unknown => {
  try {
    return JSON.parse(text === "" ? "{}" : text)
  } catch {
    return { raw: text }
  }
}

/** A wire event as the accumulator's event: a tool's result gives its status, data and error. */
export const fromChatEvent = (event: ChatPartEvent): StreamEvent => {
  switch (event.type) {
    case "text-delta":
      return { type: "text-delta", delta: event.text }
    case "tool-call":
      return {
        type: "tool-call",
        callId: event.id,
        name: event.name,
        input: parseToolArguments(event.arguments)
      }
    case "tool-result": {
      const result =
        typeof event.result === "object" && event.result !== null
          ? (event.result as {
              readonly status?: unknown
              readonly data?: unknown
              readonly error?: ToolError
            })
          : { data: event.result }
      return {
        type: "tool-result",
        callId: event.id,
        name: event.name,
        status: result.status === "error" ? "error" : "success",
        ...(result.data === undefined ? {} : { data: result.data }),
        ...(result.error === undefined ? {} : { error: result.error })
      }
    }
  }
}

/** Feeds one chat event to the accumulator when it makes parts; says whether it did. */
export const pushChatEvent = (accumulator: PartAccumulator, event: { readonly type: string }): boolean => {
  if (!isChatPartEvent(event)) return false
  accumulator.push(fromChatEvent(event))
  return true
}
