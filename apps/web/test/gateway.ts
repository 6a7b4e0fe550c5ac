/**
 * A gateway for the browser tests, started as `pnpm start` starts it (`apps/gateway/start.mjs`: the
 * bundle, the built page at `/`) in a process of its own, on a free port of 127.0.0.1, over a new
 * data folder (seeded with the example data, plus what the test adds), answered by its local model
 * (no upstream key): the gateway package's `spawnGateway`. `stop` ends the process and removes the
 * folder.
 */
import { fileURLToPath } from "node:url"
import { type SpawnedGateway, spawnGateway } from "../node_modules/@ctxo/gateway/test/spawned.ts"

const start = fileURLToPath(new URL("../node_modules/@ctxo/gateway/start.mjs", import.meta.url))

export type Gateway = SpawnedGateway

/** Starts the gateway; `prepare(dataDir)` runs on the seeded copy of the example data first. */
export const startGateway = (
  options: { readonly env?: Record<string, string>; readonly prepare?: (dataDir: string) => void } = {}
): Promise<Gateway> => spawnGateway({ entry: start, ...options })
