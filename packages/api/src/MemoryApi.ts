/**
 * The memory levels over HTTP (seed 003, `@ctxo/agent/Memory`): L1 and L2 of a session, L3 and L4
 * of the data root, each listed, pinned and deleted (a deletion hides an entry; it stays on file).
 * An entry's id names its level (`L2:<session>:t<turn>`, `L3:<hash>`).
 */
import { MemoryEntry } from "@ctxo/store/Records"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"

export const MemoryEntryView = Schema.extend(
  MemoryEntry,
  Schema.Struct({
    /** Older than its level's lifetime (listed only with `expired=true`; no source). */
    expired: Schema.Boolean
  })
).annotations({ identifier: "MemoryEntryView" })

export const MemoryList = Schema.Struct({
  level: Schema.Literal("L1", "L2", "L3", "L4"),
  entries: Schema.Array(MemoryEntryView)
}).annotations({ identifier: "MemoryList" })

const flag = Schema.optional(
  Schema.Literal("true", "false").annotations({ description: "`true` lists them too" })
)

export const SessionMemoryQuery = Schema.Struct({
  level: Schema.Literal("L1", "L2").annotations({
    description: "L1: the session's newest turns (minutes); L2: its important turns (hours)"
  }),
  expired: flag,
  deleted: flag
})

export const GlobalMemoryQuery = Schema.Struct({
  level: Schema.Literal("L3", "L4").annotations({
    description: "L3: agent-level, aggregated across sessions (days); L4: global, persistent"
  }),
  expired: flag,
  deleted: flag
})

export const PinMemory = Schema.Struct({
  /** Default true; false unpins. */
  pinned: Schema.optional(Schema.Boolean)
})

const SessionEntryPath = Schema.Struct({ id: Schema.String, entryId: Schema.String })
const EntryPath = Schema.Struct({ entryId: Schema.String })

export const PersistResult = Schema.Struct({
  /** The persistence was published on the event bus; its subscriber writes L4. */
  requested: Schema.Literal(true)
})

export class MemoryGroup extends HttpApiGroup.make("memory")
  .add(
    HttpApiEndpoint.get("session", "/api/sessions/:id/memory")
      .setPath(Schema.Struct({ id: Schema.String }))
      .setUrlParams(SessionMemoryQuery)
      .addSuccess(MemoryList)
      .annotate(OpenApi.Summary, "List a session's memory: L1 (its newest turns) or L2 (its important turns)")
      .annotate(
        OpenApi.Description,
        "L2 holds the turns whose importance (the documented rules of @ctxo/history/Importance) is over 0.6, promoted once each, and pinned L1 turns. Expired entries (older than the level's lifetime: L1 30 minutes, L2 24 hours by default) and deleted ones are left out unless asked for."
      )
  )
  .add(
    HttpApiEndpoint.post("pinSession", "/api/sessions/:id/memory/:entryId/pin")
      .setPath(SessionEntryPath)
      .setPayload(PinMemory)
      .addSuccess(MemoryEntryView)
      .annotate(OpenApi.Summary, "Pin (or unpin) an L1 or L2 entry; pinning an L1 turn promotes it to L2")
  )
  .add(
    HttpApiEndpoint.del("deleteSession", "/api/sessions/:id/memory/:entryId")
      .setPath(SessionEntryPath)
      .addSuccess(Schema.Void, { status: 204 })
      .annotate(OpenApi.Summary, "Delete an L1 or L2 entry (hidden from views and sources; kept on file)")
  )
  .add(
    HttpApiEndpoint.get("global", "/api/memory")
      .setUrlParams(GlobalMemoryQuery)
      .addSuccess(MemoryList)
      .annotate(OpenApi.Summary, "List the data root's memory: L3 (agent-level) or L4 (global, persistent)")
      .annotate(
        OpenApi.Description,
        "L3 is built by aggregating sessions' L2 (POST /api/context/aggregate); L4 is written through the event bus when a session ends, on the gateway's timer (CTXO_MEMORY_PERSIST_MS) and on POST /api/memory/persist."
      )
  )
  .add(
    HttpApiEndpoint.post("pinGlobal", "/api/memory/:entryId/pin")
      .setPath(EntryPath)
      .setPayload(PinMemory)
      .addSuccess(MemoryEntryView)
      .annotate(OpenApi.Summary, "Pin (or unpin) an L3 or L4 entry")
  )
  .add(
    HttpApiEndpoint.del("deleteGlobal", "/api/memory/:entryId")
      .setPath(EntryPath)
      .addSuccess(Schema.Void, { status: 204 })
      .annotate(OpenApi.Summary, "Delete an L3 or L4 entry (hidden; kept on file)")
  )
  .add(
    HttpApiEndpoint.post("persist", "/api/memory/persist")
      .addSuccess(PersistResult, { status: 202 })
      .annotate(OpenApi.Summary, "Persist L3 to L4 now (published on the event bus, as the timer does)")
  ) {}
