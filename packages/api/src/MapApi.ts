/**
 * A session's thinking map over HTTP (`@ctxo/compiler/ThinkingMap`): the map file (`map.json`,
 * published as `map.schema.json`) read and written with versions like the session's config, and one
 * node's context: its `ContextInfo` and the seven sections it is formatted into, with their tokens.
 */
import { FileInfo } from "@ctxo/store/FileRecords"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"

const UserContext = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/** A map file's JSON as it is written (validated against map.schema.json on PUT). */
export const ThinkingMapJson = Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
  identifier: "ThinkingMapJson",
  description:
    "A thinking map: { title, coreQuestion?, finalGoal?, background?, userContext?, nodes: [{ id, title, question?, goal?, status?, conclusion?, dependencies?, parent?, description?, notes?, userContext? }] } (packages/compiler/map.schema.json)."
})

export const MapDocument = Schema.Struct({
  path: Schema.String,
  /** Send it back as If-Match to write over exactly this version. */
  version: Schema.String,
  map: ThinkingMapJson
}).annotations({ identifier: "ThinkingMapDocument" })

export const MapNodeView = Schema.Struct({
  id: Schema.String,
  title: Schema.String,
  question: Schema.optional(Schema.String),
  goal: Schema.optional(Schema.String),
  status: Schema.optional(Schema.String),
  conclusion: Schema.optional(Schema.String)
}).annotations({ identifier: "MapNodeContext" })

export const ContextInfoView = Schema.Struct({
  background: Schema.optional(Schema.String),
  map: Schema.Struct({
    title: Schema.String,
    coreQuestion: Schema.optional(Schema.String),
    finalGoal: Schema.optional(Schema.String)
  }),
  node: Schema.Struct({
    ...MapNodeView.fields,
    description: Schema.optional(Schema.String),
    notes: Schema.optional(Schema.String),
    parent: Schema.optional(Schema.String),
    dependencies: Schema.Array(Schema.String),
    userContext: Schema.optional(UserContext)
  }),
  /** Root first, the node's parent last. */
  ancestors: Schema.Array(MapNodeView),
  dependencies: Schema.Array(MapNodeView),
  children: Schema.Array(MapNodeView),
  /** The turns whose chat input named this node: the user's words and the assistant's final text. */
  conversation: Schema.Array(
    Schema.Struct({ turn: Schema.Int, role: Schema.Literal("user", "assistant"), text: Schema.String })
  ),
  /** The map's user context with the node's over it. */
  userContext: UserContext
}).annotations({ identifier: "ContextInfo" })

export const ContextSection = Schema.Struct({
  id: Schema.Literal("background", "map", "node", "ancestors", "dependencies", "children", "conversation"),
  title: Schema.String,
  text: Schema.String,
  tokens: Schema.Int,
  /** Its share of the budget plus what the sections before it left. */
  budget: Schema.Int,
  items: Schema.Int,
  kept: Schema.Int,
  dropped: Schema.Int
}).annotations({ identifier: "ContextSection" })

export const NodeContextResponse = Schema.Struct({
  session: Schema.String,
  node: Schema.String,
  model: Schema.String,
  counting: Schema.Literal("exact", "estimate"),
  budget: Schema.Int,
  tokens: Schema.Int,
  info: ContextInfoView,
  /** The seven sections in order: background, map, node, ancestors, dependencies, children, conversation. */
  sections: Schema.Array(ContextSection),
  text: Schema.String
}).annotations({ identifier: "NodeContext" })

const SessionPath = Schema.Struct({ id: Schema.String })

export class MapGroup extends HttpApiGroup.make("map")
  .add(
    HttpApiEndpoint.get("get", "/api/sessions/:id/map")
      .setPath(SessionPath)
      .addSuccess(MapDocument)
      .annotate(OpenApi.Summary, "Read the session's thinking map (map.json) with its version")
      .annotate(
        OpenApi.Description,
        "404 MapNotFound while the session has no map; a map file that no longer validates is 422 InvalidMap naming the node and the field (repair it with PUT)."
      )
  )
  .add(
    HttpApiEndpoint.put("put", "/api/sessions/:id/map")
      .setPath(SessionPath)
      .setHeaders(Schema.Struct({ "if-match": Schema.optional(Schema.String) }))
      .setPayload(ThinkingMapJson)
      .addSuccess(FileInfo)
      .annotate(
        OpenApi.Summary,
        "Write the session's thinking map (validated; If-Match for optimistic concurrency)"
      )
      .annotate(
        OpenApi.Description,
        "An invalid map (a field of the wrong type, a duplicate id, an unknown parent or dependency, a cycle) is 422 InvalidMap naming the node and the field, and nothing is written. If-Match with a version that is no longer the file's is 409 VersionConflict."
      )
  )
  .add(
    HttpApiEndpoint.get("nodeContext", "/api/sessions/:id/map/nodes/:nodeId/context")
      .setPath(Schema.Struct({ id: Schema.String, nodeId: Schema.String }))
      .setUrlParams(
        Schema.Struct({
          model: Schema.optional(
            Schema.String.annotations({
              description: "Count for this model (default: the session manifest's, else the gateway's)"
            })
          ),
          budget: Schema.optional(
            Schema.NumberFromString.pipe(Schema.int(), Schema.nonNegative()).annotations({
              description:
                "Tokens for the seven sections (default: the knowledge share of the model's input budget)"
            })
          )
        })
      )
      .addSuccess(NodeContextResponse)
      .annotate(
        OpenApi.Summary,
        "One node's context: its ContextInfo and the seven sections with their tokens"
      )
      .annotate(
        OpenApi.Description,
        "The sections in order: task background, map overview, current node task (with the user context), decomposition path (ancestors), dependencies with their conclusions, existing children, the conversation about the node (the chat turns sent with `node`). Each is cut at whole items to its share of the budget, with a marker saying what was left out. An unknown node is 404 MapNodeNotFound."
      )
  ) {}
