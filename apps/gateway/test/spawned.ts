/**
 * A gateway in a process of its own, as a deployment runs it: `entry` (`start.mjs`, which builds
 * what changed first, or the bundle itself) on a free port of 127.0.0.1, over a new data folder
 * seeded with the example data (plus what `prepare` adds), answered by its local model. None of
 * this machine's `CTXO_` settings reach it (keys, an upstream, another store): only `env`'s.
 * Resolves once it says it listens; `stop` ends the process (SIGTERM, then SIGKILL after 10 s)
 * and removes the folder. The gateway's bundle test and the workbench's browser tests use it.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { cpSync, mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

export const exampleData = fileURLToPath(new URL("../../../fixtures/data", import.meta.url))

/** A port of 127.0.0.1 free a moment ago. */
export const freePort = (): Promise<number> =>
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

export interface SpawnedGateway {
  readonly baseUrl: string
  readonly dataDir: string
  /** What it wrote to stdout and stderr so far (the last 20,000 characters). */
  readonly output: () => string
  readonly stop: () => Promise<void>
}

export const spawnGateway = async (options: {
  /** The script to run: `start.mjs` or the bundle (`dist/main.js`). */
  readonly entry: string
  readonly env?: Record<string, string>
  /** Runs on the seeded copy of the example data before the gateway starts. */
  readonly prepare?: (dataDir: string) => void
}): Promise<SpawnedGateway> => {
  const dataDir = mkdtempSync(join(tmpdir(), "ctxo-spawned-gateway-"))
  let child: ChildProcess | undefined
  const stop = async () => {
    const running = child
    if (running !== undefined && running.exitCode === null && running.signalCode === null) {
      const exited = new Promise((resolve) => running.once("exit", resolve))
      running.kill("SIGTERM")
      const timer = setTimeout(() => running.kill("SIGKILL"), 10_000)
      await exited
      clearTimeout(timer)
    }
    rmSync(dataDir, { recursive: true, force: true })
  }
  try {
    cpSync(exampleData, dataDir, { recursive: true })
    options.prepare?.(dataDir)
    const port = await freePort()
    const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("CTXO_")))
    const spawned = spawn(process.execPath, [options.entry], {
      env: {
        ...inherited,
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
      spawned.once("error", (error) => {
        clearTimeout(timer)
        reject(error)
      })
      spawned.once("exit", (code) => {
        clearTimeout(timer)
        reject(new Error(`the gateway exited with ${code}:\n${output.slice(-2000)}`))
      })
    })
    return { baseUrl: `http://127.0.0.1:${port}`, dataDir, output: () => output, stop }
  } catch (e) {
    await stop()
    throw e
  }
}
