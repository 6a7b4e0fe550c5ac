import { execFile } from "node:child_process"
import { outfile } from "../build.mjs"

export interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/**
 * Runs the bundled `ctxo` (built by the global setup) as a user would, stdout and stderr piped,
 * with extra environment (`undefined` removes a variable).
 */
export const ctxo = (args: ReadonlyArray<string>, env: Readonly<Record<string, string | undefined>> = {}) =>
  new Promise<Run>((resolve) => {
    const merged: Record<string, string | undefined> = { ...process.env, ...env }
    for (const key of Object.keys(merged)) if (merged[key] === undefined) delete merged[key]
    execFile(process.execPath, [outfile, ...args], { env: merged }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : Number(error.code ?? 1), stdout, stderr })
    })
  })
