import { execFile } from "node:child_process"
import { outfile } from "../build.ts"

export interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** Runs the bundled `ctxo` (built by the global setup) as a user would, with extra environment. */
export const ctxo = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) =>
  new Promise<Run>((resolve) => {
    execFile(
      process.execPath,
      [outfile, ...args],
      { env: { ...process.env, ...env } },
      (error, stdout, stderr) => {
        resolve({ code: error === null ? 0 : Number(error.code ?? 1), stdout, stderr })
      }
    )
  })
