/**
 * A gateway for the browser tests, started as `pnpm start` starts it (`apps/gateway/start.mjs`: the
 * bundle, the built page at `/`) in a process of its own, on a free port of 127.0.0.1, over a new
 * data folder (seeded with the example data, plus what the test adds), answered by its local model
 * (no upstream key). `stop` ends the process (by its id) and removes the folder.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { cpSync, mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const start = fileURLToPath(new URL("../node_modules/@ctxo/gateway/start.mjs", import.meta.url))
export const exampleData = fileURLToPath(new URL("../../../fixtures/data", import.meta.url))

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() =>
        typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port"))
      )
    })
  })

export interface Gateway {
  readonly baseUrl: string
  readonly dataDir: string
  readonly stop: () => Promise<void>
}

/** Starts the gateway; `prepare(dataDir)` runs on the seeded copy of the example data first. */
export const startGateway = async (
  options: { readonly env?: Record<string, string>; readonly prepare?: (dataDir: string) => void } = {}
): Promise<Gateway> => {
  const dataDir = mkdtempSync(join(tmpdir(), "ctxo-web-test-"))
  let child: ChildProcess | undefined
  const stop = async () => {
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child!.once("exit", resolve))
      child.kill("SIGTERM")
      const timer = setTimeout(() => child!.kill("SIGKILL"), 10_000)
      await exited
      clearTimeout(timer)
    }
    rmSync(dataDir, { recursive: true, force: true })
  }
  try {
    cpSync(exampleData, dataDir, { recursive: true })
    options.prepare?.(dataDir)
    const port = await freePort()
    const spawned = spawn(process.execPath, [start], {
      env: {
        ...process.env,
        ...options.env,
        PORT: String(port),
        HOST: "127.0.0.1",
        CTXO_DATA_DIR: dataDir,
        CTXO_LOG_FORMAT: "json"
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    child = spawned
    let output = ""
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the gateway did not start in 60 s:\n${output.slice(-2000)}`)),
        60_000
      )
      const read = (chunk: Buffer) => {
        // Read to the end (a full pipe would stop the gateway); the tail is kept for an error.
        output = (output + chunk.toString()).slice(-20_000)
        if (output.includes(`Listening on http://127.0.0.1:${port}`)) {
          clearTimeout(timer)
          resolve()
        }
      }
      spawned.stdout!.on("data", read)
      spawned.stderr!.on("data", read)
      spawned.once("exit", (code) => {
        clearTimeout(timer)
        reject(new Error(`the gateway exited with ${code}:\n${output.slice(-2000)}`))
      })
    })
    return { baseUrl: `http://127.0.0.1:${port}`, dataDir, stop }
  } catch (e) {
    await stop()
    throw e
  }
}
