/**
 * The meta context of seed 004 (layer three) as a source: what a plan-execute-reflect run shows its
 * planner and reflector (the goal, the plan, the execution status, the specialists' results, the
 * feedback), handed to the compile by the orchestrator (`@ctxo/agent/Orchestrator`) and cut to the
 * `agent_output` share: items whole, most wanted first, and a marker saying what was left out.
 */
import { Effect } from "effect"
import type { ContextSource } from "./ContextSource.ts"

export interface MetaItem {
  /** Stable id (`goal`, `plan`, `result:s2`, ...): the provenance of what is kept. */
  readonly id: string
  readonly text: string
  /** Higher is kept first when the share cannot hold every item (default 0). */
  readonly priority?: number
  /** Always kept (the role's instructions, the goal). */
  readonly required?: boolean
}

export interface MetaContext {
  /** Who is asked (`planner`, `reflector`, `answerer`, ...): named in the unit's provenance. */
  readonly role: string
  /** In the order they are shown. */
  readonly items: ReadonlyArray<MetaItem>
}

/** The budget source the meta context draws on. */
export const META_SHARE = "agent_output"

/**
 * Keeps the required items and then the most wanted that fit in `budget` tokens (counted with
 * `count`), shown in their given order, with a line saying how many were left out.
 */
export const cutMeta = (
  meta: MetaContext,
  budget: number,
  count: (text: string) => number
): {
  readonly text: string
  readonly kept: ReadonlyArray<string>
  readonly dropped: ReadonlyArray<string>
} => {
  const order = meta.items
    .map((item, i) => ({ item, i }))
    .sort(
      (a, b) =>
        Number(b.item.required === true) - Number(a.item.required === true) ||
        (b.item.priority ?? 0) - (a.item.priority ?? 0) ||
        a.i - b.i
    )
  const keep = new Set<number>()
  let used = 0
  for (const { item, i } of order) {
    const tokens = count(item.text) + 2
    if (item.required === true || used + tokens <= budget) {
      keep.add(i)
      used += tokens
    }
  }
  const kept = meta.items.filter((_, i) => keep.has(i))
  const dropped = meta.items.filter((_, i) => !keep.has(i))
  const marker =
    dropped.length === 0
      ? []
      : [
          `[${dropped.length} of ${meta.items.length} items left out to fit the ${budget}-token share: ${dropped.map((d) => d.id).join(", ")}]`
        ]
  return {
    text: [...kept.map((k) => k.text), ...marker].join("\n\n"),
    kept: kept.map((k) => k.id),
    dropped: dropped.map((d) => d.id)
  }
}

/** `meta__context`: the run's meta context handed to the compile, cut to its share. */
export const metaSource: ContextSource = {
  id: "meta",
  collect: (c) => {
    const meta = c.meta
    if (meta === undefined || meta.items.length === 0) return Effect.succeed([])
    const cut = cutMeta(meta, c.budgetOf(META_SHARE), (text) => c.counter.count(text))
    return Effect.succeed([
      {
        key: "meta__context",
        id: `meta:${meta.role}`,
        ref: `run ${meta.role}`,
        priority: 100,
        text: cut.text
      }
    ])
  }
}
