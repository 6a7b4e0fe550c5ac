/**
 * What `scripts/paired.mjs` times for this package, side by side with another revision of its
 * sources: one more turn of the turn bench's session warmed to 200 turns (`warmSession.ts`), and
 * its engine's preview of the next one (a warm compile). The session grows as it is timed: with
 * 400 pairs, its compiles are timed at about 650 turns. Then a turn of one of four sessions warmed
 * to 100 turns, each in turn (as a gateway serves several): what a session's caches keep while the
 * others take turns.
 */
import { makeWarmSession } from "./warmSession.ts"

export const setup = async () => {
  const session = await makeWarmSession(200)
  const several = await Promise.all(Array.from({ length: 4 }, () => makeWarmSession(100)))
  let next = 0
  return {
    turn: session.turn,
    compile: session.compile,
    "turn, 4 sessions in turn": () => several[next++ % several.length]!.turn()
  }
}
