/**
 * The V8 flags a long-running ctxo process sets at its start, before its layers allocate: the
 * gateway (`apps/gateway/src/main.ts`, from its configuration), and the turn bench, which measures
 * the engine as the gateway runs it. `setFlagsFromString` changes them for what the process does
 * next: pretenuring decisions V8 made before, and the optimized code that allocates by them, stay,
 * so they go first.
 *
 * - **The heap's growth** past its live objects before a full collection. V8's own sizing lets a
 *   busy gateway's heap grow to about four times what is live: RSS went from 281 to 441 MB over
 *   1,000 then 10,000 mixed requests with 84 MB live; at 50%, 235 to 278 MB.
 * - **Allocation-site pretenuring, off.** V8 notes, at each scavenge, how many of the objects a
 *   code site made are still alive, and when nearly all are, it makes that site's objects in the
 *   old space from then on. A turn's history versions, compiled messages and rendered request are
 *   all alive at the scavenge that finds them, so their sites are judged long-lived, yet each is
 *   replaced by the next turn. The engine alone (the turn bench's session, 1,000 turns after 500),
 *   V8's default against off: 1.8 against 0.15 MB promoted a scavenge, a mean pause of 4.8-5.0
 *   against 2.0-2.3 ms, 2 full collections against none. Through the gateway (400 turns of a long
 *   session): 1.5 against 0.9 MB promoted, 8 full collections against 5, the turn's p99 35-42
 *   against 22-27 ms.
 */
import { setFlagsFromString } from "node:v8"

/** How far the heap grows past what is live before a full collection when nothing says (percent). */
export const DEFAULT_HEAP_GROWING_PERCENT = 50

export interface Settings {
  /** Percent; 0 leaves V8's own sizing. Default `DEFAULT_HEAP_GROWING_PERCENT`. */
  readonly heapGrowingPercent?: number
  /** `true` keeps V8's allocation-site pretenuring (its default); ctxo turns it off. */
  readonly allocationSitePretenuring?: boolean
}

/** The flags for these settings, in the order they are set. */
export const flagsOf = (settings: Settings = {}): ReadonlyArray<string> => {
  const growing = settings.heapGrowingPercent ?? DEFAULT_HEAP_GROWING_PERCENT
  return [
    ...(growing > 0 ? [`--heap-growing-percent=${growing}`] : []),
    ...(settings.allocationSitePretenuring === true ? [] : ["--no-allocation-site-pretenuring"])
  ]
}

/** Sets the flags for these settings in this process; returns them. */
export const apply = (settings: Settings = {}): ReadonlyArray<string> => {
  const flags = flagsOf(settings)
  for (const flag of flags) setFlagsFromString(flag)
  return flags
}
