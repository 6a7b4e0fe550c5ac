/**
 * A seeded generator of recorded sessions (`ctxo.session/v1`): agent and notebook sessions of 3 to
 * 50 turns with large tool outputs (Read of 2-6k tokens, Grep, failing Bash with stderr,
 * LS, Write, Edit, errors with codes), mixed Chinese and English, `@file` mentions (repeated, more
 * than five), pinned and dismissed memories, crashes retried with the same idempotency key or the
 * same text, and the usage a provider would report. The same seed gives the same sessions, byte
 * for byte, so a failure in `pnpm eval` is replayed with `CTXO_EVAL_SEED=<seed>`.
 *
 * `writeGeneratedSessions({ dir })` is what the eval run calls: it writes the sessions as fixture
 * files and returns the seed it used (printed by the run).
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { join, relative } from "node:path"
import type { Action, RecordedSession, Step, Turn } from "./Session.ts"

/** mulberry32: a small, fast, well-distributed 32-bit PRNG (public domain). */
export const random = (seed: number) => {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (min: number, max: number) => min + Math.floor(next() * (max - min + 1))
  const pick = <A>(items: ReadonlyArray<A>): A => items[Math.floor(next() * items.length)]!
  const chance = (p: number) => next() < p
  return { next, int, pick, chance }
}
export type Random = ReturnType<typeof random>

const ENGLISH = [
  "The refund path checks the captured amount before it calls the ledger.",
  "Retries use exponential backoff with jitter and stop after five attempts.",
  "Every handler validates its input with a schema and fails with a typed error.",
  "The invoice totals are computed in minor units to avoid rounding drift.",
  "Webhook signatures are verified before the payload is parsed."
]
const CHINESE = [
  "退款流程在调用账本之前会检查已捕获的金额。",
  "重试使用带抖动的指数退避，最多尝试五次。",
  "每个处理函数都用模式校验输入，并以类型化的错误失败。",
  "发票总额以最小货币单位计算，避免舍入误差。",
  "在解析负载之前先验证 Webhook 签名。",
  "波函数描述了量子系统的状态，它的模的平方给出测量到粒子的概率密度。"
]
const FILES = [
  "src/payments/refund.ts",
  "src/payments/capture.ts",
  "src/billing/invoice.ts",
  "src/orders/handler.ts",
  "src/users/repo.ts",
  "src/webhooks/verify.ts",
  "src/ledger/entries.ts",
  "docs/设计说明.md"
]
const ENTITIES = ["Invoice", "Customer", "Refund", "Ledger", "Payout", "Dispute"]

const CODE_LAW = `# CODE_LAW

- TypeScript strict; no \`any\`.
- 每个修复都要附带一个修复前会失败的测试。
- Run \`pnpm test\` before saying a task is done.
- Never commit secrets; configuration comes from the environment.
`
const AGENT_PROMPT =
  "You are a careful coding agent. Work in small steps: think, call one tool, read its result. Follow the project's CODE_LAW.md. 用中文或英文回答，与用户一致。"
const TUTOR_PROMPT =
  "You are a patient tutor. Explain step by step and cite the notes you use. 请用用户的语言回答。"

/** A source file of `lines` long lines (about 10 tokens each). */
const sourceFile = (rng: Random, path: string, lines: number): string => {
  const out: Array<string> = [`// ${path}: ${rng.pick(ENGLISH)}`]
  for (let i = 0; out.length < lines; i++) {
    const entity = ENTITIES[i % ENTITIES.length]!
    if (i % 9 === 4) out.push(`  // ${rng.pick(CHINESE)}`)
    else
      out.push(
        `export const load${entity}${i} = (id: string) => db.query("select * from ${entity.toLowerCase()}s where id = $1 and tenant = $2", [id, tenant])`
      )
  }
  return `${out.join("\n")}\n`
}
const stderr = (n: number) =>
  Array.from({ length: n }, (_, i) =>
    i % 8 === 0
      ? `FAIL test/payments/refund.test.ts > refund > rejects a refund above the captured amount (case ${i / 8 + 1})`
      : `    at file:///srv/app/test/payments/refund.test.ts:${40 + (i % 37)}:${11 + (i % 7)}`
  ).join("\n")

interface Built {
  readonly steps: Array<Step>
  readonly answer: string
}

/** One tool step of an agent turn: the thought with its call, and the recorded result. */
const toolStep = (rng: Random, ids: { n: number }, large: boolean): Array<Step> => {
  const id = `call_${++ids.n}`
  const file = rng.pick(FILES)
  const kind = rng.pick(["Read", "Read", "Grep", "Bash", "LS", "Write", "Edit", "ReadError"] as const)
  const thought = (name: string, input: unknown): Step => ({
    type: "assistant",
    text: `Thought: ${rng.pick(rng.chance(0.4) ? CHINESE : ENGLISH)}\nAction: ${name}[${JSON.stringify(input)}]`
  })
  const step = (name: string, input: unknown, result: Extract<Step, { type: "tool_result" }>["result"]) => [
    thought(name, input),
    { type: "tool_call" as const, id, name, input },
    { type: "tool_result" as const, callId: id, name, result }
  ]
  switch (kind) {
    case "Read": {
      // 2-6k tokens when large: 60-170 long lines of about 35 tokens.
      const lines = large ? rng.int(60, 170) : rng.int(10, 40)
      const content = sourceFile(rng, file, lines)
      return step(
        "Read",
        { path: file },
        { status: "success", data: { file, content, totalLines: lines }, text: content, stats: { lines } }
      )
    }
    case "Grep": {
      const n = rng.int(3, large ? 120 : 20)
      return step(
        "Grep",
        { pattern: "tenant", path: "src" },
        {
          status: "success",
          data: {
            pattern: "tenant",
            totalMatches: n,
            matches: Array.from({ length: n }, (_, i) => ({
              file: FILES[i % FILES.length],
              line: 10 + ((i * 17) % 300),
              text: `  const scoped = db.withTenant(tenant) // ${ENGLISH[i % ENGLISH.length]}`
            }))
          },
          stats: { files: Math.min(n, FILES.length) }
        }
      )
    }
    case "Bash": {
      const lines = large ? rng.int(80, 300) : rng.int(5, 30)
      return step(
        "Bash",
        { command: "pnpm test test/payments" },
        {
          status: "error",
          data: {
            command: "pnpm test test/payments",
            exitCode: 1,
            stdout: Array.from({ length: 20 }, (_, i) => ` ✓ capture case ${i + 1}`).join("\n"),
            stderr: stderr(lines)
          },
          error: { code: "EXIT_1", message: "Command failed with exit code 1: pnpm test test/payments" }
        }
      )
    }
    case "LS": {
      const n = rng.int(5, large ? 300 : 40)
      return step(
        "LS",
        { path: "src" },
        {
          status: "success",
          data: {
            path: "src",
            entries: Array.from(
              { length: n },
              (_, i) => `${ENTITIES[i % ENTITIES.length]!.toLowerCase()}${i}.ts`
            ),
            totalEntries: n
          }
        }
      )
    }
    case "Write": {
      const content = sourceFile(rng, file, large ? rng.int(60, 170) : rng.int(5, 30))
      return step("Write", { path: file }, { status: "success", data: { file, created: true, content } })
    }
    case "Edit":
      return step(
        "Edit",
        { path: file, oldString: "tenant", newString: "tenantId" },
        {
          status: "success",
          data: {
            file,
            startLine: rng.int(1, 200),
            newString: "  const scoped = db.withTenant(tenantId)",
            applied: true
          }
        }
      )
    default:
      return step(
        "Read",
        { path: `${file}.bak` },
        {
          status: "error",
          error: { code: "ENOENT", message: `ENOENT: no such file or directory, open '${file}.bak'` }
        }
      )
  }
}

const mentionInput = (rng: Random): string => {
  const n = rng.int(1, 8)
  const named = Array.from({ length: n }, () => rng.pick(FILES.filter((f) => !f.includes("设计"))))
  return `${rng.pick(["Check", "请检查", "Compare"])} ${named.map((f) => `@${f}`).join(" and ")} ${rng.pick(["before the refactor.", "并解释差异。"])}`
}

export interface GenerateOptions {
  /** Turns (default: 3 to 24, or 20 to 50 with `long`). */
  readonly turns?: number
  /** Tool outputs of 2-6k tokens in most agent turns. */
  readonly long?: boolean
  readonly policy?: RecordedSession["policy"]
  readonly id?: string
  readonly description?: string
  /** The compaction trigger's window (default: one of 8k, 16k, 30k, 128k). */
  readonly contextWindow?: number
  readonly keepTurns?: number
  /** Pin an early turn and dismiss a result every few turns (besides the random ones). */
  readonly curate?: boolean
}

/** Usage a provider would report: the visible history grows and drops after each compaction. */
export const withUsage = (
  turns: Array<Turn>,
  window: number,
  keepTurns: number,
  ratio = 0.8
): Array<Turn> => {
  let visible: Array<number> = []
  return turns.map((t) => {
    const size = Math.ceil(JSON.stringify(t).length / 4)
    if (visible.reduce((a, b) => a + b, 0) + Math.ceil(t.user.length / 3) >= ratio * window)
      visible = [...visible.slice(-keepTurns).map((s) => Math.min(s, 800)), 600]
    visible.push(size)
    return {
      ...t,
      usage: { inputTokens: 900 + visible.reduce((a, b) => a + b, 0), outputTokens: 120 + (size % 200) }
    }
  })
}

/** One session from a seed: the same seed, the same session. */
export const generateSession = (seed: number, options: GenerateOptions = {}): RecordedSession => {
  const rng = random(seed)
  const policy = options.policy ?? (rng.chance(0.75) ? "code-agent" : "notebook")
  const count = options.turns ?? (options.long ? rng.int(20, 26) : rng.int(3, 10))
  const ids = { n: 0 }
  const turns: Array<Turn> = []
  const callsByTurn: Array<Array<string>> = []
  const pinned = new Set<number>()
  for (let i = 0; i < count; i++) {
    const n = i + 1
    const zh = rng.chance(0.4)
    const user = rng.chance(0.12)
      ? mentionInput(rng)
      : `${zh ? rng.pick(CHINESE) : rng.pick(ENGLISH)} ${zh ? `第 ${n} 步：请继续。` : `Step ${n}: what should change next?`}`
    const built: Built =
      policy === "code-agent"
        ? (() => {
            const steps: Array<Step> = []
            const tools = rng.int(0, options.long ? 3 : 2)
            for (let k = 0; k < tools; k++)
              steps.push(...toolStep(rng, ids, options.long === true || rng.chance(0.3)))
            return { steps, answer: `${rng.pick(ENGLISH)} ${rng.pick(CHINESE)}` }
          })()
        : { steps: [], answer: Array.from({ length: rng.int(1, 6) }, () => rng.pick(CHINESE)).join("") }
    const calls = built.steps.flatMap((s) => (s.type === "tool_call" ? [s.id] : []))
    const actions: Array<Action> = []
    // Dismiss a result of an earlier turn; pin an earlier turn (at most two pins per session).
    // Only a turn's first call is sure to be in history on every profile: the input's compile
    // always fits, so the model's first call runs; a later one may come after a refusal.
    if (i > 1 && (rng.chance(0.15) || (options.curate === true && i % 6 === 0))) {
      const earlier = callsByTurn.slice(0, i).flat()
      if (earlier.length > 0)
        actions.push({
          type: "dismiss",
          callId: rng.pick(earlier),
          summary: "已读过，结论见上文 (read, conclusion above)."
        })
    }
    if (i > 2 && pinned.size < 2 && (rng.chance(0.08) || (options.curate === true && i === 4))) {
      const turn = options.curate === true && i === 4 ? 2 : rng.int(Math.max(1, i - 2), i)
      if (!pinned.has(turn)) {
        pinned.add(turn)
        actions.push({ type: "pin", turn })
      }
    }
    const crash =
      calls.length > 0 && rng.chance(0.08)
        ? { afterStep: rng.int(1, Math.max(1, calls.length * 2 - 1)) }
        : undefined
    callsByTurn.push(crash === undefined && calls.length > 0 ? [calls[0]!] : [])
    turns.push({
      user,
      steps: [...built.steps, { type: "assistant", text: built.answer }],
      ...(crash === undefined ? {} : { crash }),
      // Half the crashes retry with an idempotency key, half with the same text only.
      ...(crash !== undefined && rng.chance(0.5) ? { inputKey: `key-${seed}-${n}` } : {}),
      ...(actions.length === 0 ? {} : { actions })
    })
  }
  const keepTurns = options.keepTurns ?? rng.pick([2, 4, 10])
  const contextWindow = options.contextWindow ?? rng.pick([8_192, 16_385, 30_000, 128_000])
  const id = options.id ?? `gen-${seed.toString(16)}`
  return {
    format: "ctxo.session/v1",
    id,
    description:
      options.description ??
      `Generated (seed ${seed}): ${count} ${policy} turns, keep ${keepTurns}, compaction window ${contextWindow}.`,
    policy,
    model: "gpt-4o",
    settings: { keepTurns, contextWindow },
    systemPrompt: policy === "code-agent" ? AGENT_PROMPT : TUTOR_PROMPT,
    files:
      policy === "code-agent"
        ? { "CODE_LAW.md": CODE_LAW, "src/payments/refund.ts": sourceFile(rng, "src/payments/refund.ts", 40) }
        : { "notes.md": `# 笔记\n\n${CHINESE.join("\n")}\n\n# Notes\n\n${ENGLISH.join("\n")}\n` },
    turns: withUsage(turns, contextWindow, keepTurns),
    // Refusals of generated sessions are not known in advance: only justified ones are accepted.
    expect: Object.fromEntries(
      ["gpt-4o", "gpt-4", "claude-sonnet-4-5", "gpt-3.5-turbo"].map((p) => [
        p,
        { justifiedRefusals: true, minCompiles: p === "gpt-4o" || p === "claude-sonnet-4-5" ? count : 1 }
      ])
    )
  }
}

/** The sessions of one run: `count` sessions from `seed` (each its own derived seed). */
export const generateSessions = (seed: number, count: number): Array<RecordedSession> => {
  const rng = random(seed)
  return Array.from({ length: count }, (_, i) => {
    const own = Math.floor(rng.next() * 0xffffffff) >>> 0
    return generateSession(own, { long: i % 8 === 0, id: `gen-${seed}-${String(i + 1).padStart(2, "0")}` })
  })
}

/** The seed of this run: `CTXO_EVAL_SEED` when set, else a fresh one (print it). */
export const seedOf = (env: Readonly<Record<string, string | undefined>> = process.env): number => {
  const given = env.CTXO_EVAL_SEED
  if (given !== undefined && given.trim() !== "") {
    const n = Number(given)
    if (!Number.isInteger(n) || n < 0 || n > 0xffffffff)
      throw new Error(`CTXO_EVAL_SEED must be an integer from 0 to 4294967295, got "${given}"`)
    return n
  }
  return Math.floor(Math.random() * 0xffffffff) >>> 0
}

/**
 * Writes `count` generated sessions (default 32) as fixture files into `dir` (emptied of earlier
 * ones), with the seed from `CTXO_EVAL_SEED` or a fresh one; returns the seed and the files.
 */
export const writeGeneratedSessions = (options: {
  readonly dir: string
  readonly count?: number
  readonly seed?: number
}): { readonly seed: number; readonly files: ReadonlyArray<string> } => {
  const seed = options.seed ?? seedOf()
  mkdirSync(options.dir, { recursive: true })
  for (const f of readdirSync(options.dir)) if (f.endsWith(".json")) rmSync(join(options.dir, f))
  const files = generateSessions(seed, options.count ?? 32).map((s) => {
    const file = join(options.dir, `${s.id}.json`)
    writeFileSync(file, `${JSON.stringify(s, null, 2)}\n`)
    return file
  })
  return { seed, files }
}

/**
 * For `pnpm eval`: writes the generated sessions into `dir` and returns promptfoo tests for them
 * (`vars.recording` relative to the repository `root`, as the provider reads it) and the seed.
 */
export const generatedTests = (options: {
  readonly dir: string
  readonly root: string
  readonly count?: number
  readonly seed?: number
}): {
  readonly seed: number
  readonly tests: ReadonlyArray<{
    readonly description: string
    readonly vars: { readonly recording: string }
  }>
} => {
  const { seed, files } = writeGeneratedSessions(options)
  return {
    seed,
    tests: files.map((file) => {
      const id = file.slice(file.lastIndexOf("/") + 1).replace(/\.json$/, "")
      return {
        description: `${id}: generated session (CTXO_EVAL_SEED=${seed})`,
        vars: { recording: relative(options.root, file).split("\\").join("/") }
      }
    })
  }
}
