import { Effect, type Layer, Logger, ManagedRuntime } from "effect"
import { afterEach, describe, expect, it, vi } from "vitest"
import * as LogLines from "../src/LogLines.ts"

/** What is written to stdout while `f` runs, line by line. */
const stdoutOf = async (f: () => unknown) => {
  const written: Array<string> = []
  const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk: unknown) => {
    written.push(String(chunk))
    return true
  })
  try {
    await f()
  } finally {
    spy.mockRestore()
  }
  return written
    .join("")
    .split("\n")
    .filter((l) => l !== "")
}
const withoutTime = (line: string) => {
  const { timestamp, ...rest } = JSON.parse(line) as Record<string, unknown>
  expect(new Date(String(timestamp)).toISOString()).toBe(timestamp)
  return rest
}

let runtimes: Array<ManagedRuntime.ManagedRuntime<never, never>> = []
afterEach(async () => {
  for (const r of runtimes) await r.dispose()
  runtimes = []
})
const runtimeOf = async (layer: Layer.Layer<never>) => {
  const managed = ManagedRuntime.make(layer)
  runtimes.push(managed)
  return managed.runtime()
}

const access = {
  route: "/v1/chat/completions",
  status: 200,
  tenant: "default",
  model: "gpt-4o",
  session: undefined
}

describe("the gateway's JSON log lines", () => {
  it("writes Effect's JSON line, one write to stdout per line", async () => {
    const lines = await stdoutOf(() =>
      Effect.runPromise(
        Effect.logWarning("upstream slow").pipe(
          Effect.annotateLogs({ attempt: 2 }),
          Effect.provide(LogLines.json)
        )
      )
    )
    expect(lines).toHaveLength(1)
    expect(withoutTime(lines[0]!)).toMatchObject({
      message: "upstream slow",
      logLevel: "WARN",
      annotations: { attempt: 2 },
      spans: {}
    })
  })

  it("makes the access line as Effect.logInfo makes it, field for field", async () => {
    const runtime = await runtimeOf(LogLines.json)
    // Made here: Effect's formatting is not run for it.
    const formatted = vi.spyOn(Logger.jsonLogger, "log")
    const fast = await stdoutOf(() => LogLines.infoLogger(runtime)("POST /v1/chat/completions 200", access))
    expect(formatted).not.toHaveBeenCalled()
    formatted.mockRestore()
    const effect = await stdoutOf(() =>
      Effect.runPromise(
        Effect.logInfo("POST /v1/chat/completions 200").pipe(
          Effect.annotateLogs(access),
          Effect.provide(LogLines.json)
        )
      )
    )
    expect(fast).toHaveLength(1)
    expect(withoutTime(fast[0]!)).toEqual({ ...withoutTime(effect[0]!), fiberId: "#-1" })
    expect(withoutTime(fast[0]!)).toMatchObject({ logLevel: "INFO", annotations: { status: 200 } })
    expect(JSON.parse(fast[0]!).annotations).not.toHaveProperty("session")
  })

  it("hands a line with a structured annotation, or any other logger's, to the runtime's loggers", async () => {
    const json = await runtimeOf(LogLines.json)
    const formatted = vi.spyOn(Logger.jsonLogger, "log")
    const structured = await stdoutOf(() =>
      LogLines.infoLogger(json)("ended", { ...access, usage: { in: 3, out: 5 } })
    )
    expect(formatted).toHaveBeenCalledTimes(1)
    formatted.mockRestore()
    expect(JSON.parse(structured[0]!).annotations).toMatchObject({ usage: { in: 3, out: 5 }, status: 200 })
    const seen: Array<unknown> = []
    const other = await runtimeOf(
      Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ message, annotations }) => seen.push([message, Object.fromEntries(annotations)]))
      )
    )
    const written = await stdoutOf(() => LogLines.infoLogger(other)("POST /v1/chat/completions 200", access))
    expect(written).toEqual([])
    expect(seen).toEqual([["POST /v1/chat/completions 200", access]])
  })
})
