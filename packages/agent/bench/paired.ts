/**
 * What `scripts/paired.mjs` times for this package, side by side with another revision of its
 * sources: one more turn of the turn bench's session warmed to 200 turns (`warmSession.ts`), and
 * its engine's preview of the next one (a warm compile). The session grows as it is timed: with
 * 400 pairs, its compiles are timed at about 650 turns.
 */
import { makeWarmSession } from "./warmSession.ts"

export const setup = async () => {
  const session = await makeWarmSession(200)
  return { turn: session.turn, compile: session.compile }
}
