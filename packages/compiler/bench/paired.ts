/**
 * What `scripts/paired.mjs` times for this package, side by side with another revision of its
 * sources: one warm compile of the compile bench's 2,000-message session (`longSession.ts`), each
 * given the previous compile's state, as a gateway passes it.
 */
import { makeLongSession } from "./longSession.ts"

export const setup = async () => {
  const session = await makeLongSession()
  let result = await session.run()
  return {
    "warm compile": async () => {
      result = await session.run(result.state)
    }
  }
}
