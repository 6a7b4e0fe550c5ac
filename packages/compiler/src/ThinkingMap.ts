/**
 * The thinking map of seed 004 (layer one): a session's map file, and the `ContextInfo` of one node
 * (the map, the node, its ancestors root first, its dependencies with their conclusions, its
 * children, the conversation about it and the user's own context), formatted into the seven
 * sections of the seed's `FormatContextForAgent`.
 */

/** The map's global information (`MapInfo`). */
export interface MapInfo {
  readonly title: string
  readonly coreQuestion?: string
  readonly finalGoal?: string
}

/** A node of the map (`NodeInfo`). */
export interface NodeInfo {
  readonly id: string
  readonly title: string
  readonly question?: string
  readonly goal?: string
  readonly status?: string
  readonly conclusion?: string
  readonly description?: string
  readonly notes?: string
  readonly parent?: string
  readonly dependencies: ReadonlyArray<string>
}

/** Another node as the context of one node shows it (`NodeContextInfo`). */
export interface NodeContext {
  readonly id: string
  readonly title: string
  readonly question?: string
  readonly goal?: string
  readonly status?: string
  readonly conclusion?: string
}

/** One message of the conversation about a node (the turns whose input names the node). */
export interface ConversationMessage {
  readonly turn: number
  readonly role: "user" | "assistant"
  readonly text: string
}

/** Everything one node's task needs (`ContextInfo`). */
export interface ContextInfo {
  /** The agent's role and overall task (section 1, "task background"); a default when absent. */
  readonly background?: string
  readonly map: MapInfo
  readonly node: NodeInfo
  /** Root first, the node's parent last. */
  readonly ancestors: ReadonlyArray<NodeContext>
  readonly dependencies: ReadonlyArray<NodeContext>
  readonly children: ReadonlyArray<NodeContext>
  readonly conversation: ReadonlyArray<ConversationMessage>
  readonly userContext: Readonly<Record<string, unknown>>
}
