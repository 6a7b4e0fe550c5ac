import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { ctxo } from "./ctxo.ts"

// The bundled CLI as a child process with stdout and stderr piped (not a terminal), as a script or
// `| less` runs it. NO_COLOR and FORCE_COLOR are cleared so the environment of the run decides nothing.
const plain = { NO_COLOR: undefined, FORCE_COLOR: undefined }
const ESC = "\u001b"
const commands = [
  "compile",
  "preview",
  "blocks",
  "count",
  "models",
  "replay",
  "sessions",
  "tasks",
  "memory",
  "aggregate",
  "map",
  "run"
] as const
const subcommands = [
  ["sessions", "list"],
  ["sessions", "pause"],
  ["sessions", "resume"],
  ["sessions", "end"],
  ["sessions", "update"],
  ["tasks", "list"],
  ["tasks", "add"],
  ["tasks", "update"],
  ["tasks", "distribute"],
  ["memory", "list"],
  ["memory", "pin"],
  ["memory", "delete"],
  ["memory", "persist"],
  ["map", "show"],
  ["map", "set"],
  ["map", "context"]
] as const
const sessions = fileURLToPath(new URL("../../../fixtures/sessions", import.meta.url))
const temps: Array<string> = []
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true })
})

describe("ctxo --help", () => {
  it("prints the root help without escape codes when stdout is not a terminal", async () => {
    const run = await ctxo(["--help"], plain)
    expect(run.code).toBe(0)
    expect(run.stderr).toBe("")
    expect(run.stdout).not.toContain(ESC)
    expect(run.stdout).toMatchSnapshot()
  })

  it.each(commands)(
    "prints `ctxo %s --help` plainly, with ctxo in the usage line and examples",
    async (name) => {
      const run = await ctxo([name, "--help"], plain)
      expect(run.code).toBe(0)
      expect(run.stdout).not.toContain(ESC)
      expect(run.stdout).toMatch(new RegExp(`^USAGE\\n  ctxo ${name} `))
      expect(run.stdout).toMatch(/\nEXAMPLES\n/)
      for (const line of run.stdout.split("\n").filter((l) => l.startsWith("  $ ")))
        expect(line).toMatch(/^ {2}\$ ctxo /)
      // No generic filler from the library: every option says what it is for.
      expect(run.stdout).not.toMatch(
        /user-defined piece of text|This setting is optional|A true or false value/
      )
      expect(run.stdout).toMatchSnapshot()
    }
  )

  it.each(subcommands)("prints `ctxo %s %s --help`: its usage, options and examples", async (group, name) => {
    const run = await ctxo([group, name, "--help"], plain)
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(new RegExp(`^USAGE\\n  ctxo ${group} ${name} `))
    expect(run.stdout).toMatch(/\nOPTIONS\n {2}--data DIR\n/)
    expect(run.stdout).toMatch(/\nEXAMPLES\n/)
    for (const line of run.stdout.split("\n").filter((l) => l.startsWith("  $ ")))
      expect(line).toMatch(new RegExp(`^ {2}\\$ ctxo ${group} ${name} `))
    expect(run.stdout).not.toMatch(/user-defined piece of text|This setting is|May be specified/)
  })

  it("lists a group's commands in its help", async () => {
    const run = await ctxo(["tasks", "--help"], plain)
    expect(run.stdout).toMatch(/\nCOMMANDS\n {2}list +List a session's tasks/)
    for (const name of ["list", "add", "update", "distribute"])
      expect(run.stdout).toMatch(new RegExp(`\\n {2}ctxo tasks ${name} `))
  })

  it("stays plain with NO_COLOR even when colors are forced, and colors only when asked", async () => {
    const noColor = await ctxo(["compile", "--help"], { NO_COLOR: "1", FORCE_COLOR: "1" })
    expect(noColor.stdout).not.toContain(ESC)
    const forced = await ctxo(["compile", "--help"], { NO_COLOR: undefined, FORCE_COLOR: "1" })
    expect(forced.stdout).toContain(`${ESC}[1mUSAGE`)
  })

  it("finds the help after a command's options, and for a bare `ctxo`", async () => {
    const late = await ctxo(["compile", "--session", "x", "--help"], plain)
    expect(late.code).toBe(0)
    expect(late.stdout).toMatch(/^USAGE\n {2}ctxo compile /)
    const bare = await ctxo([], plain)
    expect(bare.stdout).toMatch(/\nCOMMANDS\n/)
  })

  it("says that --data defaults to ./data, the gateway's live data root", async () => {
    for (const name of ["compile", "preview"]) {
      const run = await ctxo([name, "--help"], plain)
      expect(run.stdout.replace(/\s+/g, " ")).toContain(
        "Defaults to ./data, the live data root of the gateway (`pnpm start`)"
      )
    }
  })

  it("prints usage errors without escape codes on a piped stderr", async () => {
    const run = await ctxo(["compile"], plain)
    expect(run.code).toBe(1)
    expect(run.stderr).toContain("Expected to find option: '--session'")
    expect(run.stderr).not.toContain(ESC)
  })
})

describe("--models", () => {
  it("is a file of model overrides in every command, and the old list meaning gets a clear error", async () => {
    // Every command that knows models (blocks, sessions and tasks do not).
    for (const name of commands.filter(
      (c) => c !== "blocks" && c !== "sessions" && c !== "tasks" && c !== "memory" && c !== "map"
    )) {
      const run = await ctxo([name, "--help"], plain)
      expect(run.stdout).toMatch(/\n {2}--models FILE\n {6}A JSON file of model overrides/)
    }
    const replay = await ctxo(["replay", sessions, "--models", "gpt-4o,claude-sonnet-4-5"], plain)
    expect(replay.code).toBe(1)
    expect(replay.stderr).toContain(
      "--models takes a JSON file of model overrides, and 'gpt-4o,claude-sonnet-4-5' is not a file. To choose the models to replay for, use --profiles"
    )
    const count = await ctxo(["count", sessions, "--models", "gpt-4o"], plain)
    expect(count.code).toBe(1)
    expect(count.stderr).toContain("To choose the model itself, use --model (-m).")
    const old = await ctxo(["replay", sessions, "--models-file", "x.json"], plain)
    expect(old.code).toBe(1)
    expect(old.stderr).toContain("--models-file is now --models FILE")
  })

  it("applies the models file in replay (a model only the file defines)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ctxo-help-"))
    temps.push(dir)
    const models = join(dir, "models.json")
    writeFileSync(
      models,
      JSON.stringify({
        models: {
          "acme/roomy": {
            contextWindow: 64000,
            maxOutput: 4000,
            tokenizer: { kind: "exact", encoding: "o200k_base" }
          }
        }
      })
    )
    const run = await ctxo(
      ["replay", join(sessions, "tree-context.json"), "--profiles", "acme/roomy", "--models", models],
      plain
    )
    expect(run.stderr).toBe("")
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(/^1 sessions × 1 profiles: \d+ compiles/m)
  })
})
