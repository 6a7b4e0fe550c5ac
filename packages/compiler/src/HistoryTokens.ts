/**
 * What shown history (the summaries, whole turns) adds to a request of one format: rendered as a
 * compile renders it and counted as a compile counts its request, framing included. A format is
 * not a constant factor over the text: an Anthropic request carries each message as JSON content
 * blocks (their types and ids, and a tool result's JSON as a string inside that JSON, its quotes
 * escaped), an OpenAI request chat messages with their tool calls, a ReAct request one prompt.
 *
 * Compaction plans the turns it keeps with this (`CompactOptions.countHistory`), so what it keeps
 * fits beside the rest of the request in the format the turn sends.
 */
import type { Counter } from "@ctxo/budget/Tokenizer"
import type { Message } from "@ctxo/history/Message"
import type { ComposedLayer } from "./Composer.ts"
import { chatMessagesOf } from "./internal/units.ts"
import type { Format } from "./Render.ts"
import { render } from "./Render.ts"

/**
 * Tokens that `summaries` and `messages` (whole turns, so roles alternate as in a request) add to a
 * request in `format`. Each summary is counted as a system layer of its own: what the request
 * carries, or a few tokens more where a format frames each system message (the compile joins them
 * into one `compression__context` layer).
 */
export const historyTokens = (
  counter: Counter,
  format: Format
): ((history: {
  readonly summaries: ReadonlyArray<string>
  readonly messages: ReadonlyArray<Message>
}) => number) => {
  const empty = counter.countMessages([])
  return ({ summaries, messages }) => {
    if (summaries.length === 0 && messages.length === 0) return 0
    const layers: Array<ComposedLayer> = [
      ...summaries.map((text): ComposedLayer => ({ _tag: "system", id: "compression__context", text })),
      ...(messages.length === 0
        ? []
        : [{ _tag: "history" as const, id: "checkpoint_messages" as const, messages }])
    ]
    // The renderers read the layers only: the policy does not change how history renders.
    return counter.countMessages(chatMessagesOf(render({ policy: "layered", layers }, format))) - empty
  }
}
