/**
 * Many sessions into one agent's request over HTTP (`@ctxo/agent/Aggregate`): each listed session's
 * build for the query, merged, deduplicated, ranked and cut to one budget, every block with its
 * provenance `{ session, level?, source }`.
 */
import { SessionState } from "@ctxo/store/Records"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"

const Level = Schema.Literal("L1", "L2", "L3", "L4").annotations({
  description:
    "The memory level: L1 a session's own turns (recent or recalled), L2 its summaries, pinned turns and important memories, L3 agent-level memory, L4 global memory; absent for knowledge, skills, rules and other sources"
})

export const AggregateContext = Schema.Struct({
  sessions: Schema.Array(Schema.String)
    .pipe(
      Schema.minItems(1, { message: () => "list at least one session to aggregate" }),
      Schema.maxItems(100, { message: () => "at most 100 sessions can be aggregated at once" })
    )
    .annotations({ description: "The sessions, in the order their blocks are preferred on ties" }),
  query: Schema.String.pipe(
    Schema.pattern(/\S/, { message: () => "the question the aggregated context is for cannot be empty" })
  ).annotations({
    description: "The question the agent answers: each session compiles it as its next input"
  }),
  model: Schema.optional(
    Schema.String.annotations({
      description: "The agent's model (default: the gateway's CTXO_MODEL); every session compiles for it"
    })
  ),
  format: Schema.optional(Schema.Literal("openai", "anthropic", "react"))
})
  .annotations({ parseOptions: { onExcessProperty: "error" } })
  .annotations({ identifier: "AggregateContext" })

export const Provenance = Schema.Struct({
  session: Schema.String,
  level: Schema.optional(Level),
  /** The budget source in that session's compile (recent_history, knowledge, semantic, ...). */
  source: Schema.String,
  /** The unit in that session's compile report (`turn-3`, `L3:…`, `notes.md#Intro`). */
  unit: Schema.String,
  /** The layer it stood in there: a `__context` key, or `checkpoint_messages` for a conversation turn. */
  layer: Schema.String,
  ref: Schema.optional(Schema.String)
}).annotations({ identifier: "Provenance" })

export const AggregateBlock = Schema.Struct({
  id: Schema.String,
  /** The first session it came from (the group it stands in). */
  session: Schema.String,
  /** Every session it came from, in the order listed. */
  sessions: Schema.Array(Schema.String),
  level: Schema.optional(Level),
  source: Schema.String,
  provenance: Schema.Array(Provenance),
  /** BM25 relevance to the query (0: none). */
  score: Schema.Number,
  /** Tokens of its section (provenance heading and content) in the aggregated request. */
  tokens: Schema.Number,
  status: Schema.Literal("included", "dropped"),
  reason: Schema.optional(Schema.String),
  hash: Schema.String
}).annotations({ identifier: "AggregateBlock" })

const fields = {
  model: Schema.String,
  query: Schema.String,
  /** The budget report of the aggregated request (sources system_prompt, user_input, sessions; a row per block). */
  report: Schema.Unknown,
  /** Every merged block, best ranked first. */
  blocks: Schema.Array(AggregateBlock),
  sessions: Schema.Array(
    Schema.Struct({
      session: Schema.String,
      state: SessionState,
      /** Blocks its compile gave (before the merge). */
      blocks: Schema.Number,
      /** Tokens of its own compiled request. */
      tokens: Schema.Number,
      /** Memories left out because every session they come from is ended. */
      withheld: Schema.Number
    })
  ),
  skipped: Schema.Array(
    Schema.Struct({
      session: Schema.String,
      reason: Schema.Literal("ended", "failed"),
      message: Schema.String
    })
  ),
  /** L3 memory entries the contributing sessions' L2 made or refreshed. */
  promoted: Schema.Number,
  warnings: Schema.Array(Schema.String)
}

const Text = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })

/** The aggregated request, typed by `format`: system and user text only (it offers no tools). */
export const Aggregated = Schema.Union(
  Schema.Struct({
    ...fields,
    format: Schema.Literal("openai"),
    request: Schema.Struct({
      messages: Schema.Array(
        Schema.Struct({ role: Schema.Literal("system", "user"), content: Schema.String })
      )
    })
  }),
  Schema.Struct({
    ...fields,
    format: Schema.Literal("anthropic"),
    request: Schema.Struct({
      system: Schema.String,
      messages: Schema.Array(Schema.Struct({ role: Schema.Literal("user"), content: Schema.Array(Text) }))
    })
  }),
  Schema.Struct({
    ...fields,
    format: Schema.Literal("react"),
    request: Schema.Struct({ prompt: Schema.String })
  })
).annotations({ identifier: "Aggregated" })
export type Aggregated = typeof Aggregated.Type

export class AggregateGroup extends HttpApiGroup.make("aggregate").add(
  HttpApiEndpoint.post("aggregate", "/api/context/aggregate")
    .setPayload(AggregateContext)
    .addSuccess(Aggregated)
    .annotate(OpenApi.Summary, "Aggregate many sessions' contexts into one request for one agent")
    .annotate(
      OpenApi.Description,
      "Each listed session compiles the query as its next input (its memories, recalled turns, tools on demand and knowledge, as a turn would); their blocks are merged (the same content once, with every session, level and source it came from), ranked by relevance to the query and cut, whole, to the model's available input beside the data root's system prompt and the query; the request is counted exactly and never over it. `blocks` lists every block with its provenance, tokens and whether it was kept (a dropped one says why); an ended session is in `skipped` and contributes nothing. The sessions' L2 memories become L3 (GET /api/memory?level=L3). 400 for an empty `sessions` or `query`, 404 for a session the caller does not have."
    )
) {}
