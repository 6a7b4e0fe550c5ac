/**
 * The blocks a compile put in its request, each with its text, read back from the compile's result:
 * what another agent can be handed of a session's build (`@ctxo/agent/Aggregate`).
 *
 * A block is a row of the report's ledger (`report.units`, status `included` or `cut`) whose text
 * stands in the composed request:
 *
 * - a context unit: its `__context` layer holds the kept units' texts joined by a blank line; the
 *   layer is split back into units by the ledger's hashes (each row's `hash` is the SHA-256 of its
 *   unit's text), so every block's text is exactly the text the request carries;
 * - a turn of the conversation (`turn-<n>`, sources `recent_history` and `pinned_history`): its
 *   messages as the request shows them (a turn cut to fit is shown reduced, and so it is here), as
 *   text in the ReAct form (`[user] …`, `Action: name[{…}]`, `[tool] {…}`).
 *
 * Rows with no text of their own in a layer are not blocks: the system prompt, the input (and a
 * running turn), the tool definitions (they travel as `request.tools`), and units the process
 * rules keep out of the request (sharing off). A layer that cannot be split by the hashes (not
 * seen with the compiler's own units) is one block named after the layer (`whole`).
 *
 * `content` is the text without the provenance line the compiler writes in front of some units
 * (a memory's `[L3 memory, from session a turn 2]`, a recalled turn's `Earlier turn 4, recalled
 * ...:`): the level, session and turn it names are in the block's id, ref and layer.
 */
import type { UnitLedger } from "@ctxo/budget/BudgetReport"
import { contentHash } from "@ctxo/budget/Fit"
import type { Turn } from "@ctxo/history/Turns"
import { turnsOf, turnWords } from "@ctxo/history/Turns"
import type { CompileResult } from "./Compile.ts"
import { budgetSourceOf } from "./internal/units.ts"
import { renderReAct } from "./Render.ts"

/** The layer a conversation turn stands in. */
export const CONVERSATION = "checkpoint_messages"

interface BlockBase {
  /** The unit's id in the ledger (`turn-12`, `L3:…`, `notes.md#Heading`, `recalled-turn-4`, a summary's id). */
  readonly id: string
  /** The budget source it drew from (the ledger's `source`). */
  readonly source: string
  readonly ref?: string
  /** `cut`: shown reduced to fit (a turn with its tool results as placeholders). */
  readonly status: "included" | "cut"
  /** Its tokens in the compile's own count. */
  readonly tokens: number
  /** The text the request carries (a turn: its messages in the ReAct text form). */
  readonly text: string
  /**
   * What it says: the text without the compiler's provenance line; a turn's words (`turnWords`),
   * the form recall and memory carry a turn in.
   */
  readonly content: string
}

export type IncludedBlock =
  | (BlockBase & {
      readonly kind: "context"
      /** The `__context` key of its layer. */
      readonly layer: string
      /** True for a layer that could not be split by the ledger's hashes: one block for all of it. */
      readonly whole?: boolean
    })
  | (BlockBase & { readonly kind: "turn"; readonly layer: typeof CONVERSATION; readonly turn: Turn })

/** A turn's words (`@ctxo/history/Turns`), re-exported for the readers of included blocks. */
export { turnWords }

/** The provenance lines the compiler writes in front of memories and recalled turns. */
const MEMORY_HEADER = /^\[L[1-4] memory, from [^\n]*\]\n/
const RECALL_HEADER = /^Earlier turn \d+, recalled as relevant to this input[^\n]*:\n/

/** A unit's text without the provenance line of its layer. */
export const contentOf = (layer: string, text: string): string =>
  layer === "important_memory__context" || layer === "memory__context"
    ? text.replace(MEMORY_HEADER, "")
    : layer === "recall__context"
      ? text.replace(RECALL_HEADER, "")
      : text

const TURN_ID = /^turn-(\d+)$/
const SEPARATOR = "\n\n"

/**
 * Splits a layer's text into the rows' texts (joined by a blank line, in any order): from the
 * start, the shortest stretch up to a blank line (or the end) whose hash is that of a row not yet
 * taken, then on from there; undefined when the text does not split that way.
 */
const splitLayer = (
  text: string,
  rows: ReadonlyArray<UnitLedger>,
  taken: ReadonlySet<UnitLedger>
): ReadonlyArray<readonly [UnitLedger, string]> | undefined => {
  const byHash = new Map<string, Array<UnitLedger>>()
  for (const row of rows) {
    if (taken.has(row)) continue
    const list = byHash.get(row.hash)
    if (list === undefined) byHash.set(row.hash, [row])
    else list.push(row)
  }
  const out: Array<readonly [UnitLedger, string]> = []
  const used = new Set<UnitLedger>()
  let start = 0
  for (;;) {
    let end = text.indexOf(SEPARATOR, start)
    for (;;) {
      const stop = end === -1 ? text.length : end
      const piece = text.slice(start, stop)
      const row = byHash.get(contentHash(piece))?.find((r) => !used.has(r))
      if (row !== undefined) {
        out.push([row, piece])
        used.add(row)
        if (stop === text.length) return out
        start = stop + SEPARATOR.length
        break
      }
      if (end === -1) return undefined
      end = text.indexOf(SEPARATOR, end + 1)
    }
  }
}

/** The blocks of a compile's request, in the request's order, each with its ledger row's facts. */
export const includedBlocks = (result: CompileResult): ReadonlyArray<IncludedBlock> => {
  const turnRows = new Map<number, UnitLedger>()
  const contextRows: Array<UnitLedger> = []
  for (const row of result.report.units) {
    if ((row.status !== "included" && row.status !== "cut") || row.source === "user_input") continue
    const turn = TURN_ID.exec(row.id)
    if (turn !== null && (row.source === "recent_history" || row.source === "pinned_history"))
      turnRows.set(Number(turn[1]), row)
    else contextRows.push(row)
  }
  const facts = (row: UnitLedger) => ({
    id: row.id,
    source: row.source,
    ...(row.ref === undefined ? {} : { ref: row.ref }),
    status: row.status === "cut" ? ("cut" as const) : ("included" as const),
    tokens: row.tokens
  })
  const taken = new Set<UnitLedger>()
  const blocks: Array<IncludedBlock> = []
  for (const layer of result.composition.layers) {
    if (layer._tag === "query" || layer.id === "system_prompt") continue
    if (layer._tag === "history") {
      for (const turn of turnsOf(layer.messages)) {
        const row = turnRows.get(turn.turn)
        if (row === undefined) continue
        const text = renderReAct({
          policy: result.composition.policy,
          layers: [{ _tag: "history", id: CONVERSATION, messages: turn.messages }]
        }).prompt
        blocks.push({
          kind: "turn",
          layer: CONVERSATION,
          turn,
          ...facts(row),
          text,
          content: turnWords(turn)
        })
      }
      continue
    }
    const split = splitLayer(layer.text, contextRows, taken)
    if (split === undefined) {
      blocks.push({
        kind: "context",
        layer: layer.id,
        whole: true,
        id: layer.id,
        source: budgetSourceOf(layer.id),
        status: "included",
        tokens: result.layers.find((l) => l.id === layer.id)?.tokens ?? 0,
        text: layer.text,
        content: layer.text
      })
      continue
    }
    for (const [row, text] of split) {
      taken.add(row)
      blocks.push({
        kind: "context",
        layer: layer.id,
        ...facts(row),
        text,
        content: contentOf(layer.id, text)
      })
    }
  }
  return blocks
}
