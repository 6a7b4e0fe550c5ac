/**
 * Writes the recorded sessions in fixtures/sessions/ (ctxo.session/v1). Deterministic: the same
 * script writes the same bytes. Each scenario is written out step by step as an agent session
 * would go; large tool outputs (a 3,000-line file, 200 grep matches, 400 lines of stderr) are
 * built from realistic line templates so the files stay reviewable.
 *
 *   node --import tsx/esm packages/replay/scripts/fixtures.ts
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { generateSession, generateSessions, withUsage } from "../src/Generate.ts"
import type { RecordedSession, Step, Turn } from "../src/Session.ts"

const out = fileURLToPath(new URL("../../../fixtures/sessions", import.meta.url))

// --- realistic text builders
const tsModule = (name: string, lines: number): string => {
  const body: Array<string> = [
    `// ${name}: generated from the payments service layout`,
    `import { Effect, Schema } from "effect"`,
    `import { Db } from "./db.js"`,
    ""
  ]
  for (let i = 0; body.length < lines; i++) {
    const entity = ["Invoice", "Customer", "Refund", "Ledger", "Payout", "Dispute"][i % 6]!
    body.push(
      `export const load${entity}${i} = (id: string) =>`,
      `  Effect.gen(function* () {`,
      `    const db = yield* Db`,
      `    const row = yield* db.query("select * from ${entity.toLowerCase()}s where id = $1", [id])`,
      `    if (row === undefined) return yield* Effect.fail(new NotFound({ entity: "${entity}", id }))`,
      `    return Schema.decodeUnknownSync(${entity})(row)`,
      `  })`,
      ""
    )
  }
  return `${body.slice(0, lines).join("\n")}\n`
}
const authTs = `import { verify } from "./jwt.js"
import { findUser } from "./users.js"

export interface Session { readonly userId: string; readonly expiresAt: number }

export const login = async (email: string, password: string): Promise<Session> => {
  const user = await findUser(email)
  if (user === undefined) throw new Error("unknown user")
  const ok = await verify(password, user.passwordHash)
  if (ok) throw new Error("wrong password")
  return { userId: user.id, expiresAt: Date.now() + 3600 * 1000 }
}

export const isExpired = (session: Session, now = Date.now()) => session.expiresAt < now
`
const codeLaw = `# CODE_LAW

- TypeScript strict; no \`any\`.
- Every bug fix comes with a test that failed before the fix.
- Run \`pnpm test\` before saying a task is done.
- Never commit secrets; configuration comes from the environment.
`
const stderrLines = (n: number) =>
  Array.from({ length: n }, (_, i) =>
    i % 10 === 0
      ? `FAIL test/payments/refund.test.ts > refund > rejects a refund above the captured amount (case ${i / 10 + 1})`
      : i % 10 === 1
        ? `AssertionError: expected 'accepted' to be 'rejected'`
        : `    at file:///srv/app/test/payments/refund.test.ts:${40 + (i % 37)}:${11 + (i % 7)}`
  ).join("\n")
const grepMatches = (n: number) =>
  Array.from({ length: n }, (_, i) => ({
    file: `src/${["billing", "orders", "users", "reports"][i % 4]}/${["service", "handler", "repo"][i % 3]}${Math.floor(i / 12)}.ts`,
    line: 10 + ((i * 17) % 300),
    text: `    logger.warn("deprecated: use chargeV2 instead of charge", { orderId })`
  }))
const chinese = [
  "波函数描述了量子系统的状态，它的模的平方给出测量到粒子的概率密度。",
  "薛定谔方程是描述波函数随时间演化的基本方程。",
  "不确定性原理告诉我们，位置和动量不能同时被精确测量。",
  "在一维无限深势阱中，能量本征值与量子数的平方成正比。",
  "隧穿效应说明粒子可以穿过经典力学中无法越过的势垒。"
]

// --- session builders
let callCounter = 0
const call = (
  name: string,
  input: unknown,
  result: Extract<Step, { type: "tool_result" }>["result"],
  thought: string
): Array<Step> => {
  const id = `call_${++callCounter}`
  return [
    { type: "assistant", text: `Thought: ${thought}\nAction: ${name}[${JSON.stringify(input)}]` },
    { type: "tool_call", id, name, input },
    { type: "tool_result", callId: id, name, result }
  ]
}
const answer = (text: string): Step => ({ type: "assistant", text })
const ok = (data: unknown, extra: Partial<{ text: string; stats: unknown; context: unknown }> = {}) => ({
  status: "success" as const,
  data,
  ...extra
})
const fail = (message: string, data?: unknown, code?: string) => ({
  status: "error" as const,
  ...(data === undefined ? {} : { data }),
  error: { ...(code === undefined ? {} : { code }), message }
})

const base = (id: string, description: string, policy: RecordedSession["policy"], model = "gpt-4o") => ({
  format: "ctxo.session/v1" as const,
  id,
  description,
  policy,
  model
})
const agentPrompt =
  "You are a careful coding agent. Work in small steps: think, call one tool, read its result. Follow the project's CODE_LAW.md. Finish with a short summary of what changed."
const tutorPrompt =
  "You are a patient tutor. Explain step by step, check understanding, and cite the notes you use."

const sessions: Array<RecordedSession> = []
/** Per session and profile: expected refusals (turn, step) and a minimum of compiles. */
const expectations: Readonly<Record<string, RecordedSession["expect"]>> = {
  "many-small-turns": {
    "gpt-4o": { minCompiles: 200 },
    "gpt-4": { minCompiles: 200 },
    "claude-sonnet-4-5": { minCompiles: 200 },
    "gpt-3.5-turbo": { minCompiles: 200 }
  },
  // On gpt-4 (8k) the running step's full Bash result alone is over the window: refused.
  "bash-400-stderr": {
    "gpt-4o": { minCompiles: 3 },
    "gpt-4": { minCompiles: 2, refusals: [{ turn: 1, step: 1 }] },
    "claude-sonnet-4-5": { minCompiles: 3 },
    "gpt-3.5-turbo": { minCompiles: 3 }
  },
  "block-references": {
    "gpt-4o": { minCompiles: 2 },
    "gpt-4": { minCompiles: 2 },
    "claude-sonnet-4-5": { minCompiles: 2 },
    "gpt-3.5-turbo": { minCompiles: 2 }
  },
  "budget-over-keep-turns": {
    "gpt-4o": { minCompiles: 28 },
    "gpt-4": { minCompiles: 28 },
    "claude-sonnet-4-5": { minCompiles: 28 },
    "gpt-3.5-turbo": { minCompiles: 28 }
  },
  "chinese-code-agent": {
    "gpt-4o": { minCompiles: 4 },
    "gpt-4": { minCompiles: 4 },
    "claude-sonnet-4-5": { minCompiles: 4 },
    "gpt-3.5-turbo": { minCompiles: 4 }
  },
  "chinese-notebook": {
    "gpt-4o": { minCompiles: 5 },
    "gpt-4": { minCompiles: 5 },
    "claude-sonnet-4-5": { minCompiles: 5 },
    "gpt-3.5-turbo": { minCompiles: 5 }
  },
  "crash-and-retry": {
    "gpt-4o": { minCompiles: 6 },
    "gpt-4": { minCompiles: 6 },
    "claude-sonnet-4-5": { minCompiles: 6 },
    "gpt-3.5-turbo": { minCompiles: 6 }
  },
  "dismiss-and-pin": {
    "gpt-4o": { minCompiles: 23 },
    "gpt-4": { minCompiles: 23 },
    "claude-sonnet-4-5": { minCompiles: 23 },
    "gpt-3.5-turbo": { minCompiles: 23 }
  },
  "edit-large": {
    "gpt-4o": { minCompiles: 4 },
    "gpt-4": { minCompiles: 4 },
    "claude-sonnet-4-5": { minCompiles: 4 },
    "gpt-3.5-turbo": { minCompiles: 4 }
  },
  "explicit-references": {
    "gpt-4o": { minCompiles: 2 },
    "gpt-4": { minCompiles: 2 },
    "claude-sonnet-4-5": { minCompiles: 2 },
    "gpt-3.5-turbo": { minCompiles: 2 }
  },
  "fix-login-bug": {
    "gpt-4o": { minCompiles: 8 },
    "gpt-4": { minCompiles: 8 },
    "claude-sonnet-4-5": { minCompiles: 8 },
    "gpt-3.5-turbo": { minCompiles: 8 }
  },
  "grep-200-matches": {
    "gpt-4o": { minCompiles: 3 },
    "gpt-4": { minCompiles: 3 },
    "claude-sonnet-4-5": { minCompiles: 3 },
    "gpt-3.5-turbo": { minCompiles: 3 }
  },
  "layered-knowledge": {
    "gpt-4o": { minCompiles: 3 },
    "gpt-4": { minCompiles: 3 },
    "claude-sonnet-4-5": { minCompiles: 3 },
    "gpt-3.5-turbo": { minCompiles: 3 }
  },
  "line-references": {
    "gpt-4o": { minCompiles: 2 },
    "gpt-4": { minCompiles: 2 },
    "claude-sonnet-4-5": { minCompiles: 2 },
    "gpt-3.5-turbo": { minCompiles: 2 }
  },
  "long-16k-mixed": {
    "gpt-4o": { minCompiles: 110 },
    "gpt-4": {
      minCompiles: 105,
      refusals: [
        { turn: 1, step: 3 },
        { turn: 22, step: 2 },
        { turn: 31, step: 2 },
        { turn: 37, step: 3 }
      ]
    },
    "claude-sonnet-4-5": { minCompiles: 110 },
    "gpt-3.5-turbo": { minCompiles: 110 }
  },
  "long-16k-reads": {
    "gpt-4o": { minCompiles: 81 },
    "gpt-4": {
      minCompiles: 78,
      refusals: [
        { turn: 20, step: 2 },
        { turn: 21, step: 3 },
        { turn: 28, step: 2 }
      ]
    },
    "claude-sonnet-4-5": { minCompiles: 81 },
    "gpt-3.5-turbo": { minCompiles: 81 }
  },
  "long-16k-zh": {
    "gpt-4o": { minCompiles: 62 },
    "gpt-4": { minCompiles: 60, refusals: [{ turn: 6, step: 2 }] },
    "claude-sonnet-4-5": { minCompiles: 62 },
    "gpt-3.5-turbo": { minCompiles: 62 }
  },
  "long-8k-mixed": {
    "gpt-4o": { minCompiles: 89 },
    "gpt-4": {
      minCompiles: 85,
      refusals: [
        { turn: 8, step: 2 },
        { turn: 22, step: 2 },
        { turn: 25, step: 3 },
        { turn: 27, step: 2 }
      ]
    },
    "claude-sonnet-4-5": { minCompiles: 89 },
    "gpt-3.5-turbo": { minCompiles: 89 }
  },
  "long-8k-notebook": {
    "gpt-4o": { minCompiles: 50 },
    "gpt-4": { minCompiles: 50 },
    "claude-sonnet-4-5": { minCompiles: 50 },
    "gpt-3.5-turbo": { minCompiles: 50 }
  },
  "long-8k-reads": {
    "gpt-4o": { minCompiles: 52 },
    "gpt-4": { minCompiles: 50, refusals: [{ turn: 5, step: 2 }] },
    "claude-sonnet-4-5": { minCompiles: 52 },
    "gpt-3.5-turbo": { minCompiles: 52 }
  },
  "long-migration-compacts": {
    "gpt-4o": { minCompiles: 192 },
    "gpt-4": { minCompiles: 192 },
    "claude-sonnet-4-5": { minCompiles: 192 },
    "gpt-3.5-turbo": { minCompiles: 192 }
  },
  "long-notebook-compacts": {
    "gpt-4o": { minCompiles: 62 },
    "gpt-4": { minCompiles: 62 },
    "claude-sonnet-4-5": { minCompiles: 62 },
    "gpt-3.5-turbo": { minCompiles: 62 }
  },
  "ls-and-glob": {
    "gpt-4o": { minCompiles: 4 },
    "gpt-4": { minCompiles: 4 },
    "claude-sonnet-4-5": { minCompiles: 4 },
    "gpt-3.5-turbo": { minCompiles: 4 }
  },
  "map-reduce-worker": {
    "gpt-4o": { minCompiles: 3 },
    "gpt-4": { minCompiles: 3 },
    "claude-sonnet-4-5": { minCompiles: 3 },
    "gpt-3.5-turbo": { minCompiles: 3 }
  },
  "mentions-many": {
    "gpt-4o": { minCompiles: 3 },
    "gpt-4": { minCompiles: 3 },
    "claude-sonnet-4-5": { minCompiles: 3 },
    "gpt-3.5-turbo": { minCompiles: 3 }
  },
  // The running step sees the 3,000-line Read whole (about 36k tokens): over the 8k and 16k windows.
  "read-3000-lines": {
    "gpt-4o": { minCompiles: 3 },
    "gpt-4": { minCompiles: 2, refusals: [{ turn: 1, step: 1 }] },
    "claude-sonnet-4-5": { minCompiles: 3 },
    "gpt-3.5-turbo": { minCompiles: 2, refusals: [{ turn: 1, step: 1 }] }
  },
  "repeated-input": {
    "gpt-4o": { minCompiles: 10 },
    "gpt-4": { minCompiles: 10 },
    "claude-sonnet-4-5": { minCompiles: 10 },
    "gpt-3.5-turbo": { minCompiles: 10 }
  },
  "restore-checkpoint": {
    "gpt-4o": { minCompiles: 7 },
    "gpt-4": { minCompiles: 7 },
    "claude-sonnet-4-5": { minCompiles: 7 },
    "gpt-3.5-turbo": { minCompiles: 7 }
  },
  "sharing-disabled": {
    "gpt-4o": { minCompiles: 2 },
    "gpt-4": { minCompiles: 2 },
    "claude-sonnet-4-5": { minCompiles: 2 },
    "gpt-3.5-turbo": { minCompiles: 2 }
  },
  "todo-recap": {
    "gpt-4o": { minCompiles: 8 },
    "gpt-4": { minCompiles: 8 },
    "claude-sonnet-4-5": { minCompiles: 8 },
    "gpt-3.5-turbo": { minCompiles: 8 }
  },
  "tree-context": {
    "gpt-4o": { minCompiles: 2 },
    "gpt-4": { minCompiles: 2 },
    "claude-sonnet-4-5": { minCompiles: 2 },
    "gpt-3.5-turbo": { minCompiles: 2 }
  },
  "write-300-lines": {
    "gpt-4o": { minCompiles: 4 },
    "gpt-4": { minCompiles: 2, refusals: [{ turn: 1, step: 1 }] },
    "claude-sonnet-4-5": { minCompiles: 4 },
    "gpt-3.5-turbo": { minCompiles: 4 }
  }
}
const add = (s: RecordedSession) => sessions.push(s)

// 1. a bug fix with every small tool
add({
  ...base(
    "fix-login-bug",
    "Code agent fixes an inverted password check: Read, Grep, Edit, Bash; CODE_LAW.md as rules; an @file mention.",
    "code-agent"
  ),
  systemPrompt: agentPrompt,
  files: {
    "CODE_LAW.md": codeLaw,
    "src/auth.ts": authTs,
    "milestones.md":
      "- [x] reproduce the login failure\n- [ ] fix the password check\n- [ ] add a regression test\n"
  },
  turns: withUsage(
    [
      {
        user: "Users with the right password cannot log in. Fix the bug in @src/auth.ts",
        steps: [
          ...call(
            "Read",
            { path: "src/auth.ts" },
            ok(
              { file: "src/auth.ts", content: authTs, totalLines: 15, mtime: "2026-11-20T10:00:00Z" },
              { text: authTs, stats: { bytes: authTs.length } }
            ),
            "Read the login function first."
          ),
          ...call(
            "Grep",
            { pattern: "verify\\(", path: "src" },
            ok({
              pattern: "verify\\(",
              matches: [
                {
                  file: "src/auth.ts",
                  line: 9,
                  text: "  const ok = await verify(password, user.passwordHash)"
                },
                {
                  file: "src/jwt.ts",
                  line: 3,
                  text: "export const verify = async (plain: string, hash: string) =>"
                }
              ]
            }),
            "Check what verify returns."
          ),
          ...call(
            "Edit",
            { path: "src/auth.ts", oldString: "if (ok) throw", newString: "if (!ok) throw" },
            ok({
              file: "src/auth.ts",
              startLine: 10,
              newString: '  if (!ok) throw new Error("wrong password")',
              applied: true
            }),
            "The check is inverted: throw when verify fails."
          ),
          ...call(
            "Bash",
            { command: "pnpm test test/auth.test.ts" },
            ok({
              command: "pnpm test test/auth.test.ts",
              exitCode: 0,
              stdout:
                " ✓ test/auth.test.ts (4 tests) 41ms\n Test Files  1 passed (1)\n      Tests  4 passed (4)\n",
              stderr: ""
            }),
            "Run the auth tests."
          ),
          answer(
            "Fixed: `login` threw on a correct password because the `verify` check was inverted. Changed `if (ok)` to `if (!ok)` in src/auth.ts; the 4 auth tests pass."
          )
        ]
      },
      {
        user: "Add a regression test for it, as CODE_LAW.md asks.",
        steps: [
          ...call(
            "Write",
            { path: "test/auth.login.test.ts" },
            ok({
              file: "test/auth.login.test.ts",
              created: true,
              content:
                'import { expect, it } from "vitest"\nimport { login } from "../src/auth.js"\n\nit("logs in with the right password", async () => {\n  await expect(login("ada@example.com", "correct horse")).resolves.toMatchObject({ userId: "u1" })\n})\n'
            }),
            "Write a test that failed before the fix."
          ),
          ...call(
            "Bash",
            { command: "pnpm test" },
            ok({
              command: "pnpm test",
              exitCode: 0,
              stdout: " Test Files  12 passed (12)\n      Tests  87 passed (87)\n",
              stderr: ""
            }),
            "Run the whole suite."
          ),
          answer(
            "Added test/auth.login.test.ts; it fails on the old check and passes now. All 87 tests pass."
          )
        ]
      }
    ],
    200_000,
    10
  )
})

// 2. a 3,000-line Read
const big = tsModule("src/payments/legacy.ts", 3_000)
add({
  ...base(
    "read-3000-lines",
    "A Read of a 3,000-line file: history keeps 500 lines and names where the full result is.",
    "code-agent"
  ),
  systemPrompt: agentPrompt,
  files: { "CODE_LAW.md": codeLaw, "src/payments/legacy.ts": big },
  turns: withUsage(
    [
      {
        user: "Where does the legacy payments module load refunds? Look at src/payments/legacy.ts",
        steps: [
          ...call(
            "Read",
            { path: "src/payments/legacy.ts" },
            ok(
              { file: "src/payments/legacy.ts", content: big, totalLines: 3_000 },
              { text: big, stats: { lines: 3_000 } }
            ),
            "Read the whole module."
          ),
          answer(
            "Refunds are loaded by the `loadRefund*` functions (every sixth loader, e.g. `loadRefund2` at line 21); each selects from `refunds` by id and decodes with the `Refund` schema."
          )
        ]
      },
      {
        user: "Summarize the pattern those loaders share.",
        steps: [
          answer(
            "Each loader: gets `Db`, runs one parameterized select, fails with `NotFound` when no row, decodes the row with the entity's Schema."
          )
        ]
      }
    ],
    200_000,
    10
  )
})

// 3. Grep with 200 matches
add({
  ...base("grep-200-matches", "A Grep with 200 matches: history keeps 5 and the count.", "code-agent"),
  systemPrompt: agentPrompt,
  files: { "CODE_LAW.md": codeLaw },
  turns: withUsage(
    [
      {
        user: "Find every call of the deprecated charge() logger warning.",
        steps: [
          ...call(
            "Grep",
            { pattern: "deprecated: use chargeV2", path: "src" },
            ok(
              { pattern: "deprecated: use chargeV2", matches: grepMatches(200), totalMatches: 200 },
              { stats: { files: 50 } }
            ),
            "Search the whole source tree."
          ),
          answer(
            "200 matches in 50 files under src/billing, src/orders, src/users and src/reports; the first five are listed above. They all log the same warning before calling charge()."
          )
        ]
      },
      {
        user: "Which directory has the most?",
        steps: [answer("They are spread evenly: 50 in each of billing, orders, users and reports.")]
      }
    ],
    200_000,
    10
  )
})

// 4. failing Bash with 400 lines of stderr
add({
  ...base(
    "bash-400-stderr",
    "A failing Bash with 400 lines of stderr: history keeps a summary and the last 20 lines; the error stays whole.",
    "code-agent"
  ),
  systemPrompt: agentPrompt,
  files: { "CODE_LAW.md": codeLaw },
  turns: withUsage(
    [
      {
        user: "Run the refund tests and tell me what fails.",
        steps: [
          ...call(
            "Bash",
            { command: "pnpm test test/payments" },
            fail(
              "Command failed with exit code 1: pnpm test test/payments",
              {
                command: "pnpm test test/payments",
                exitCode: 1,
                stdout: Array.from(
                  { length: 60 },
                  (_, i) => ` ✓ test/payments/capture.test.ts > capture case ${i + 1}`
                ).join("\n"),
                stderr: stderrLines(400)
              },
              "EXIT_1"
            ),
            "Run the payments suite."
          ),
          answer(
            "40 refund cases fail the same way: a refund above the captured amount is accepted instead of rejected (test/payments/refund.test.ts)."
          )
        ]
      },
      {
        user: "OK, what would you change?",
        steps: [
          answer(
            "Compare the requested amount with `captured - refunded` in `createRefund` and reject when it is larger."
          )
        ]
      }
    ],
    200_000,
    10
  )
})

// 5. a new 300-line Write
const newFile = tsModule("src/payments/refund-policy.ts", 300)
add({
  ...base(
    "write-300-lines",
    "A Write of a new 300-line file: history keeps a 50-line snippet.",
    "code-agent"
  ),
  systemPrompt: agentPrompt,
  files: { "CODE_LAW.md": codeLaw },
  turns: withUsage(
    [
      {
        user: "Create src/payments/refund-policy.ts with loaders for every entity.",
        steps: [
          ...call(
            "Write",
            { path: "src/payments/refund-policy.ts", content: newFile },
            ok({ file: "src/payments/refund-policy.ts", created: true, content: newFile }),
            "Write the module in one go."
          ),
          ...call(
            "Bash",
            { command: "pnpm tsc --noEmit" },
            ok({ command: "pnpm tsc --noEmit", exitCode: 0, stdout: "", stderr: "" }),
            "Typecheck."
          ),
          answer("Created src/payments/refund-policy.ts (300 lines, 37 loaders); it typechecks.")
        ]
      },
      {
        user: "Thanks. Anything risky in it?",
        steps: [answer("No: every query is parameterized and every row is decoded before use.")]
      }
    ],
    200_000,
    10
  )
})

// 6. TodoWrite and milestones
const todos = (done: number) =>
  [
    "Reproduce the refund bug",
    "Write a failing test",
    "Fix createRefund",
    "Run the suite",
    "Update the changelog"
  ].map((content, i) => ({
    content,
    status: i < done ? "completed" : i === done ? "in_progress" : "pending",
    activeForm: content
  }))
add({
  ...base(
    "todo-recap",
    "TodoWrite through a task: history keeps the recap only; milestones.md feeds todo__context.",
    "code-agent"
  ),
  systemPrompt: agentPrompt,
  files: {
    "CODE_LAW.md": codeLaw,
    "milestones.md":
      "# Milestones\n\n- [x] Reproduce the refund bug\n- [ ] Fix createRefund\n- [ ] Update the changelog\n"
  },
  turns: withUsage(
    [1, 2, 3, 4].map((k) => ({
      user: k === 1 ? "Plan the refund fix with a todo list and start." : `Continue with step ${k + 1}.`,
      steps: [
        ...call(
          "TodoWrite",
          { todos: todos(k) },
          ok({ todos: todos(k) }, { text: "Todos have been modified successfully." }),
          "Update the plan."
        ),
        answer(`Step ${k} done; next: ${todos(k)[k]?.content ?? "nothing"}.`)
      ]
    })),
    200_000,
    10
  )
})

// 7. and 8. long sessions that compact at least twice
const longAgentTurns: Array<Turn> = Array.from({ length: 64 }, (_, i) => {
  const file = `src/modules/m${String(i).padStart(2, "0")}.ts`
  const content = tsModule(file, 60 + (i % 5) * 20)
  return {
    user: `Step ${i + 1} of the migration: port ${file} to the new Db layer and keep its tests green.`,
    steps: [
      ...call("Read", { path: file }, ok({ file, content }), `Read ${file}.`),
      ...call(
        "Edit",
        { path: file },
        ok({ file, startLine: 3, newString: 'import { Db } from "../db/layer.js"', applied: true }),
        "Switch the import."
      ),
      answer(`Ported ${file}: it now imports Db from ../db/layer.js; its tests pass.`)
    ],
    ...(i % 20 === 19
      ? {
          summary: `## 📌 Archived Session Summary\n*(Contains context from turn 1 to turn ${i - 3})*\n\n### 🎯 Objectives & Status\n* **Original Goal**: port every module to the new Db layer\n* **Current Status**: modules m00-m${String(i - 4).padStart(2, "0")} ported\n`
        }
      : {})
  }
})
add({
  ...base(
    "long-migration-compacts",
    "64 turns under a 30k window with keepTurns 4: compaction fires several times, summaries persist as compression__context.",
    "code-agent"
  ),
  settings: { keepTurns: 4, triggerRatio: 0.8, contextWindow: 30_000 },
  systemPrompt: agentPrompt,
  files: { "CODE_LAW.md": codeLaw },
  turns: withUsage(longAgentTurns, 30_000, 4)
})
add({
  ...base(
    "long-notebook-compacts",
    "62 tutoring turns under a 16k window (keepTurns 5): compaction fires at least twice, with the deterministic summary.",
    "notebook"
  ),
  settings: { keepTurns: 5, contextWindow: 16_000 },
  systemPrompt: tutorPrompt,
  files: {
    "session-prompt.md": "This notebook covers introductory quantum mechanics.",
    "notes.md":
      "# Notes\n\n## Wave function\nA state vector in Hilbert space.\n\n## Operators\nObservables are Hermitian operators.\n"
  },
  manifest: {
    systemPrompt: [
      { type: "global", file: "system-prompt.md" },
      { type: "session", file: "session-prompt.md" }
    ]
  },
  turns: withUsage(
    Array.from({ length: 62 }, (_, i) => ({
      user: `Question ${i + 1}: ${["What is a wave function?", "Why must operators be Hermitian?", "How do I normalize psi?", "What does an eigenvalue mean physically?", "Explain the commutator [x, p]."][i % 5]} (variant ${i + 1})`,
      steps: [
        answer(
          `${["A wave function assigns an amplitude to every position.", "Hermitian operators have real eigenvalues, which measurements need.", "Divide by the square root of the integral of |psi|^2.", "It is a value a measurement can return.", "[x, p] = i hbar: position and momentum do not commute."][i % 5]} ${"Let us check this with a short example. ".repeat(20)}`
        )
      ]
    })),
    16_000,
    5
  )
})

// 9. many mentions, duplicates, e-mail addresses
add({
  ...base(
    "mentions-many",
    "More than 5 @file mentions with duplicates and e-mail addresses that are not mentions.",
    "code-agent"
  ),
  systemPrompt: agentPrompt,
  files: { "CODE_LAW.md": codeLaw, "src/auth.ts": authTs },
  turns: withUsage(
    [
      {
        user: "Review @src/auth.ts @src/users.ts @src/jwt.ts @src/db.ts @src/config.ts @src/server.ts @src/routes.ts and again @src/auth.ts; mail the result to ops@example.com and cc lead@corp.io",
        steps: [
          answer(
            "I will review those seven files in order, starting with src/auth.ts; mailing is not something I can do, please forward it to ops@example.com yourself."
          )
        ]
      },
      {
        user: "Start with @src/auth.ts only.",
        steps: [
          ...call("Read", { path: "src/auth.ts" }, ok({ file: "src/auth.ts", content: authTs }), "Read it."),
          answer("src/auth.ts: the password check is inverted (line 10).")
        ]
      }
    ],
    200_000,
    10
  )
})

// 10. Chinese notebook
add({
  ...base(
    "chinese-notebook",
    "A Chinese tutoring session with profile blocks and a block reference.",
    "notebook"
  ),
  systemPrompt: "你是一位耐心的物理老师。一步一步地解释，并引用笔记。",
  profile:
    "# 学习者档案\n\n## 学习目标\n理解量子力学的基本概念，能够解一维薛定谔方程。\n\n## 已有基础\n学过微积分和线性代数，了解经典力学。\n\n## 偏好\n喜欢先看直观图像，再看公式。\n",
  files: {
    "ground-truth.md": `# 量子力学笔记\n\n## 波函数\n${chinese[0]}\n\n## 薛定谔方程\n${chinese[1]}\n\n## 不确定性原理\n${chinese[2]}\n`
  },
  manifest: { profileBlocks: ["学习目标", "已有基础"] },
  turns: withUsage(
    chinese.map((line, i) => ({
      user:
        i === 0
          ? "请用 [ground-truth.md#量子力学笔记/薛定谔方程] 解释一下薛定谔方程。"
          : `继续：${line.slice(0, 12)}……这是什么意思？`,
      steps: [answer(`好的。${line}我们用一个例子来说明：${"想象一个被关在盒子里的粒子。".repeat(3)}`)]
    })),
    200_000,
    10
  )
})

// 11. dismissals and pins
add({
  ...base(
    "dismiss-and-pin",
    "The model dismisses a long tool result, the user excludes one and pins a turn; compaction keeps the pinned turn.",
    "code-agent"
  ),
  settings: { keepTurns: 2, contextWindow: 6_000 },
  systemPrompt: agentPrompt,
  files: { "CODE_LAW.md": codeLaw },
  turns: withUsage(
    [
      {
        user: "Read the payments module and the config.",
        steps: [
          ...call(
            "Read",
            { path: "src/payments/index.ts" },
            ok({ file: "src/payments/index.ts", content: tsModule("src/payments/index.ts", 200) }),
            "Read the module."
          ),
          ...call(
            "Read",
            { path: "config/app.json" },
            ok({ file: "config/app.json", content: '{ "currency": "EUR", "captureDelayHours": 24 }' }),
            "Read the config."
          ),
          answer("Payments capture after 24 hours, in EUR.")
        ]
      },
      {
        user: "Remember: captures are always in EUR. This is important.",
        steps: [answer("Noted: all captures are in EUR.")]
      },
      {
        user: "Now look at the ledger.",
        actions: [
          {
            type: "dismiss",
            callId: "call_PLACEHOLDER_1",
            summary: "payments/index.ts: 24 loaders, nothing about currency"
          },
          { type: "pin", turn: 2 }
        ],
        steps: [
          ...call(
            "Read",
            { path: "src/ledger.ts" },
            ok({ file: "src/ledger.ts", content: tsModule("src/ledger.ts", 120) }),
            "Read the ledger."
          ),
          answer("The ledger books every capture as one row per currency.")
        ]
      },
      {
        user: "Drop the config read from your memory, it is outdated.",
        actions: [{ type: "exclude", callId: "call_PLACEHOLDER_2", reason: "outdated config" }],
        steps: [answer("Done; I will not rely on that config.")]
      },
      ...Array.from({ length: 8 }, (_, i) => ({
        user: `Check ledger rule ${i + 1}.`,
        steps: [
          ...call(
            "Grep",
            { pattern: `rule${i + 1}` },
            ok({ pattern: `rule${i + 1}`, matches: grepMatches(8) }),
            "Search."
          ),
          answer(`Rule ${i + 1} holds. ${"The rows balance. ".repeat(30)}`)
        ]
      }))
    ],
    6_000,
    2
  )
})
// Resolve the placeholders to the real call ids of turn 1.
{
  const s = sessions.at(-1)!
  const ids = (s.turns[0]!.steps.filter((x) => x.type === "tool_call") as Array<{ id: string }>).map(
    (x) => x.id
  )
  const text = JSON.stringify(s).replace("call_PLACEHOLDER_1", ids[0]!).replace("call_PLACEHOLDER_2", ids[1]!)
  sessions[sessions.length - 1] = JSON.parse(text)
}

// 12. crash in the middle of a turn, and the retry
add({
  ...base(
    "crash-and-retry",
    "The process dies after a tool call in the middle of a turn; the client retries with the same idempotency key.",
    "code-agent"
  ),
  systemPrompt: agentPrompt,
  files: { "CODE_LAW.md": codeLaw, "src/auth.ts": authTs },
  turns: withUsage(
    [
      {
        user: "Read src/auth.ts and explain isExpired.",
        inputKey: "req-1",
        steps: [
          ...call("Read", { path: "src/auth.ts" }, ok({ file: "src/auth.ts", content: authTs }), "Read it."),
          answer("`isExpired` compares the session's expiry with now.")
        ]
      },
      {
        user: "Now run the auth tests and fix what fails.",
        inputKey: "req-2",
        crash: { afterStep: 1 },
        steps: [
          { type: "assistant", text: "Thought: run the tests.\nAction: Bash[pnpm test test/auth.test.ts]" },
          {
            type: "tool_call",
            id: "call_crash_1",
            name: "Bash",
            input: { command: "pnpm test test/auth.test.ts" }
          },
          {
            type: "tool_result",
            callId: "call_crash_1",
            name: "Bash",
            result: ok({
              command: "pnpm test test/auth.test.ts",
              exitCode: 0,
              stdout: "Tests 4 passed",
              stderr: ""
            })
          },
          ...call(
            "Bash",
            { command: "pnpm test test/auth.test.ts" },
            ok({
              command: "pnpm test test/auth.test.ts",
              exitCode: 0,
              stdout: " ✓ test/auth.test.ts (4 tests)\n      Tests  4 passed (4)\n",
              stderr: ""
            }),
            "The last run was interrupted; run the tests again."
          ),
          answer("All 4 auth tests pass; nothing to fix.")
        ]
      },
      { user: "Great, thanks.", inputKey: "req-3", steps: [answer("You're welcome.")] }
    ],
    200_000,
    10
  )
})

// 13. restore from a checkpoint
add({
  ...base(
    "restore-checkpoint",
    "After turn 3 the user restores the session to the checkpoint after turn 1 and asks again differently.",
    "code-agent"
  ),
  systemPrompt: agentPrompt,
  files: { "CODE_LAW.md": codeLaw, "src/auth.ts": authTs },
  turns: withUsage(
    [
      {
        user: "Read src/auth.ts.",
        steps: [
          ...call("Read", { path: "src/auth.ts" }, ok({ file: "src/auth.ts", content: authTs }), "Read it."),
          answer("Read; login and isExpired are there.")
        ]
      },
      {
        user: "Rewrite login to use sessions in Redis.",
        steps: [
          ...call(
            "Write",
            { path: "src/auth.ts" },
            ok({
              file: "src/auth.ts",
              overwritten: true,
              content: authTs.replace("Date.now()", "await redis.time()")
            }),
            "Rewrite."
          ),
          answer("Rewrote login around Redis.")
        ]
      },
      {
        user: "Hmm, that broke the build.",
        steps: [answer("Yes: redis is not a dependency. We should go back.")]
      },
      {
        user: "Let's go back: only fix the inverted password check instead.",
        restore: { toTurn: 1 },
        steps: [
          ...call(
            "Edit",
            { path: "src/auth.ts", oldString: "if (ok)", newString: "if (!ok)" },
            ok({
              file: "src/auth.ts",
              startLine: 10,
              newString: '  if (!ok) throw new Error("wrong password")'
            }),
            "Fix the check."
          ),
          answer("Fixed the check only.")
        ]
      }
    ],
    200_000,
    10
  )
})

// 14. map-reduce worker; 15. sharing disabled
const knowledge = {
  "docs/pricing.md":
    "# Pricing\n\n## Plans\nFree, Team (12 EUR per seat), Enterprise (contact sales).\n\n## Discounts\nAnnual billing saves 20%.\n",
  "docs/refunds.md":
    "# Refunds\n\n## Window\nRefunds within 30 days of capture.\n\n## Limits\nNever above the captured amount minus earlier refunds.\n"
}
add({
  ...base(
    "map-reduce-worker",
    "A map-reduce worker: no history and no shared contexts, only its chunk (the query) and the system prompt.",
    "layered"
  ),
  systemPrompt: "You summarize one chunk of a support ticket export. Output three bullet points.",
  files: knowledge,
  contexts: {
    framework__context: "Tickets are JSON lines with id, subject, body.",
    experience__context: "Earlier runs: keep bullet points under 20 words."
  },
  manifest: { knowledge: [{ path: "docs/*.md" }], process: { role: "map-worker" } },
  turns: withUsage(
    [1, 2, 3].map((k) => ({
      user: `Chunk ${k}/3: {"id": ${k * 101}, "subject": "refund not received", "body": "I asked for a refund ${k * 3} days ago..."}`,
      steps: [
        answer(
          `- Ticket ${k * 101}: refund pending ${k * 3} days\n- Customer asked once\n- Within the 30-day window`
        )
      ]
    })),
    200_000,
    10
  )
})
add({
  ...base(
    "sharing-disabled",
    "enableShareContext false with knowledge kept: shared contexts stay out, knowledge goes in.",
    "layered"
  ),
  systemPrompt: "You answer billing questions from the knowledge base only.",
  files: knowledge,
  contexts: {
    framework__context: "Answer in two sentences.",
    experience__context: "Users often confuse refunds and chargebacks."
  },
  manifest: {
    knowledge: [{ path: "docs/*.md" }],
    process: { role: "agent", enableShareContext: false, knowledge: true }
  },
  turns: withUsage(
    [
      {
        user: "Can I get a refund after 40 days?",
        steps: [answer("No: refunds are possible within 30 days of capture.")]
      },
      {
        user: "And how much does Team cost per year?",
        steps: [
          answer("12 EUR per seat per month, 20% less with annual billing: 115.20 EUR per seat per year.")
        ]
      }
    ],
    200_000,
    10
  )
})

// 16. tree context (seed 004)
add({
  ...base(
    "tree-context",
    "A notebook node with its ancestors, dependencies and children from a tree file.",
    "notebook"
  ),
  systemPrompt: tutorPrompt,
  files: {
    "tree.json": JSON.stringify(
      {
        nodes: [
          { id: "qm", title: "Quantum mechanics", content: "The course root." },
          { id: "wave", title: "Wave functions", parent: "qm", content: "States as functions." },
          {
            id: "schrodinger",
            title: "Schrödinger equation",
            parent: "wave",
            dependsOn: ["wave"],
            content: "Time evolution of psi."
          },
          { id: "well", title: "Infinite well", parent: "schrodinger", content: "The first solved example." },
          {
            id: "tunnel",
            title: "Tunnelling",
            parent: "schrodinger",
            dependsOn: ["well"],
            content: "Barrier penetration."
          }
        ]
      },
      null,
      2
    )
  },
  manifest: { tree: { file: "tree.json", node: "schrodinger" } },
  turns: withUsage(
    [
      {
        user: "Explain the Schrödinger equation in the context of this course.",
        steps: [
          answer(
            "It governs how psi evolves; we met psi in Wave functions, and the Infinite well and Tunnelling apply it."
          )
        ]
      },
      {
        user: "What should I study next?",
        steps: [answer("The Infinite well: it is the first example solved with this equation.")]
      }
    ],
    200_000,
    10
  )
})

// 17-19. line, block, inline and explicit references
const guide =
  "# Guide\n\n## Setup\n\n### Install\nRun `pnpm install` at the root.\n\n### Configure\nCopy .env.example to .env.\n\n## Usage\nRun `pnpm start`.\n"
const lecture = Array.from({ length: 40 }, (_, i) => `Line ${i + 1}: ${chinese[i % 5]}`).join("\n")
add({
  ...base("line-references", "Inline line-range references [file:12:30] in the query.", "notebook"),
  systemPrompt: tutorPrompt,
  files: { "lecture.md": lecture },
  turns: withUsage(
    [
      {
        user: "Explain [lecture.md:12:18] in simpler words.",
        steps: [
          answer(
            "Lines 12-18 restate the uncertainty principle and the infinite well: you cannot pin down both position and momentum."
          )
        ]
      },
      {
        user: "And [lecture.md:1:3]?",
        steps: [answer("Those introduce the wave function and the Schrödinger equation.")]
      }
    ],
    200_000,
    10
  )
})
add({
  ...base("block-references", "Inline block references [file#Parent/Child] in the query.", "notebook"),
  systemPrompt: tutorPrompt,
  files: { "guide.md": guide },
  turns: withUsage(
    [
      {
        user: "What does [guide.md#Guide/Setup/Install] say?",
        steps: [answer("Run pnpm install at the repository root.")]
      },
      { user: "And [guide.md#Guide/Usage]?", steps: [answer("Start it with pnpm start.")] }
    ],
    200_000,
    10
  )
})
add({
  ...base(
    "explicit-references",
    "The manifest's references[] with the first query, then inline ones.",
    "notebook"
  ),
  systemPrompt: tutorPrompt,
  files: { "guide.md": guide, "lecture.md": lecture },
  manifest: {
    references: ["[guide.md#Guide/Setup/Configure]", { path: "lecture.md", startLine: 5, endLine: 6 }]
  },
  turns: withUsage(
    [
      {
        user: "Walk me through the configuration step.",
        steps: [answer("Copy .env.example to .env, then edit the values.")]
      },
      { user: "Compare with [lecture.md:7:9].", steps: [answer("Unrelated: those lines are physics notes.")] }
    ],
    200_000,
    10
  )
})

// 20. layered knowledge by glob
add({
  ...base(
    "layered-knowledge",
    "The layered policy with framework, experience, knowledge (glob) and todo contexts.",
    "layered"
  ),
  systemPrompt: "You are the billing assistant of an online shop.",
  files: { ...knowledge, "todo.md": "- [x] answer pricing questions\n- [ ] answer refund questions\n" },
  contexts: {
    framework__context: "Reply in at most three sentences.",
    experience__context: "Customers ask about annual discounts most."
  },
  manifest: { knowledge: [{ path: "docs/*.md" }], todo: "todo.md" },
  turns: withUsage(
    [
      {
        user: "How much is the Team plan?",
        steps: [answer("12 EUR per seat per month; annual billing saves 20%.")]
      },
      { user: "What is the refund window?", steps: [answer("30 days from capture.")] },
      {
        user: "Can a refund exceed what I paid?",
        steps: [answer("No: never above the captured amount minus earlier refunds.")]
      }
    ],
    200_000,
    10
  )
})

// 21. LS and Glob past their limits
add({
  ...base(
    "ls-and-glob",
    "LS with 60 entries and Glob with 40 matches: history keeps the first 20 and 10.",
    "code-agent"
  ),
  systemPrompt: agentPrompt,
  files: { "CODE_LAW.md": codeLaw },
  turns: withUsage(
    [
      {
        user: "What is in src/ and which test files exist?",
        steps: [
          ...call(
            "LS",
            { path: "src" },
            ok({
              path: "src",
              entries: Array.from({ length: 60 }, (_, i) =>
                i % 6 === 0 ? { name: `dir${i}`, type: "dir" } : { name: `file${i}.ts`, type: "file" }
              )
            }),
            "List src."
          ),
          ...call(
            "Glob",
            { pattern: "test/**/*.test.ts" },
            ok({
              pattern: "test/**/*.test.ts",
              matches: Array.from({ length: 40 }, (_, i) => `test/unit/case${i}.test.ts`)
            }),
            "Find the tests."
          ),
          answer("src has 60 entries (10 directories); there are 40 test files under test/unit.")
        ]
      },
      { user: "Fine.", steps: [answer("OK.")] }
    ],
    200_000,
    10
  )
})

// 22. a large Edit
add({
  ...base(
    "edit-large",
    "An Edit whose new text is 120 lines: history keeps a 50-line snippet.",
    "code-agent"
  ),
  systemPrompt: agentPrompt,
  files: { "CODE_LAW.md": codeLaw },
  turns: withUsage(
    [
      {
        user: "Replace the body of src/report.ts with the new report builder.",
        steps: [
          ...call(
            "Edit",
            { path: "src/report.ts" },
            ok({
              file: "src/report.ts",
              startLine: 1,
              newString: tsModule("src/report.ts", 120),
              applied: true
            }),
            "Replace it."
          ),
          answer("Replaced src/report.ts with the new builder (120 lines).")
        ]
      },
      {
        user: "Does it compile?",
        steps: [
          ...call(
            "Bash",
            { command: "pnpm tsc --noEmit" },
            ok({ command: "pnpm tsc --noEmit", exitCode: 0, stdout: "", stderr: "" }),
            "Typecheck."
          ),
          answer("Yes.")
        ]
      }
    ],
    200_000,
    10
  )
})

// 23. Chinese code agent
add({
  ...base(
    "chinese-code-agent",
    "A code-agent session in Chinese: Chinese inputs, comments and an error message.",
    "code-agent"
  ),
  systemPrompt: "你是一个严谨的编程助手。每一步先思考，再调用一个工具。遵守 CODE_LAW.md。",
  files: {
    "CODE_LAW.md": "# 代码规范\n\n- 所有函数必须有注释。\n- 修复缺陷必须附带测试。\n",
    "src/金额.ts":
      "// 计算订单金额（含税）\nexport const 含税金额 = (金额: number, 税率: number) => 金额 * (1 + 税率)\n"
  },
  turns: withUsage(
    [
      {
        user: "请检查 @src/金额.ts 里的含税金额计算是否正确。",
        steps: [
          ...call(
            "Read",
            { path: "src/金额.ts" },
            ok({
              file: "src/金额.ts",
              content:
                "// 计算订单金额（含税）\nexport const 含税金额 = (金额: number, 税率: number) => 金额 * (1 + 税率)\n"
            }),
            "先读文件。"
          ),
          answer("计算正确：含税金额 = 金额 ×（1 + 税率）。")
        ]
      },
      {
        user: "运行测试。",
        steps: [
          ...call(
            "Bash",
            { command: "pnpm test" },
            fail("测试失败：期望 113，实际 112.99999999999999", {
              command: "pnpm test",
              exitCode: 1,
              stdout: "",
              stderr: "AssertionError: 期望 113，实际 112.99999999999999\n    at test/金额.test.ts:5:3"
            }),
            "运行全部测试。"
          ),
          answer("浮点误差导致测试失败，应当按分计算后再四舍五入。")
        ]
      }
    ],
    200_000,
    10
  )
})

// 24. the same input in several turns
add({
  ...base(
    "repeated-input",
    'The user says "continue" in several turns: each compile has this turn\'s input once.',
    "code-agent"
  ),
  systemPrompt: agentPrompt,
  files: { "CODE_LAW.md": codeLaw },
  turns: withUsage(
    Array.from({ length: 5 }, (_, i) => ({
      user: i === 0 ? "Port the five report modules, one per turn." : "continue",
      steps: [
        ...call(
          "Edit",
          { path: `src/reports/r${i}.ts` },
          ok({
            file: `src/reports/r${i}.ts`,
            startLine: 1,
            newString: 'import { Db } from "../db/layer.js"',
            applied: true
          }),
          `Port r${i}.`
        ),
        answer(`Ported src/reports/r${i}.ts.`)
      ]
    })),
    200_000,
    10
  )
})

// 25. budget wins over keepTurns on a small window
add({
  ...base(
    "budget-over-keep-turns",
    "keepTurns 10 with large turns under a 12k window: compaction keeps as many whole turns as fit and says so.",
    "code-agent"
  ),
  settings: { keepTurns: 10, contextWindow: 12_000 },
  systemPrompt: agentPrompt,
  files: { "CODE_LAW.md": codeLaw },
  turns: withUsage(
    Array.from({ length: 14 }, (_, i) => {
      const file = `src/big/part${i}.ts`
      return {
        user: `Review ${file} for unchecked errors.`,
        steps: [
          ...call("Read", { path: file }, ok({ file, content: tsModule(file, 90) }), `Read ${file}.`),
          answer(`${file}: every query result is checked.`)
        ]
      }
    }),
    12_000,
    10
  )
})

// --- long sessions for the small windows (issue 15): 20-50 turns, tool outputs of 2-6k tokens,
// mixed Chinese and English, a pinned turn and dismissed results, compaction tuned to 8k and 16k.
const longSessions: ReadonlyArray<{
  readonly id: string
  readonly seed: number
  readonly turns: number
  readonly window: number
  readonly keepTurns: number
  readonly policy: RecordedSession["policy"]
}> = [
  { id: "long-8k-reads", seed: 8_001, turns: 24, window: 8_192, keepTurns: 4, policy: "code-agent" },
  { id: "long-8k-mixed", seed: 8_002, turns: 36, window: 8_192, keepTurns: 10, policy: "code-agent" },
  { id: "long-8k-notebook", seed: 8_003, turns: 50, window: 8_192, keepTurns: 10, policy: "notebook" },
  { id: "long-16k-reads", seed: 16_001, turns: 30, window: 16_385, keepTurns: 4, policy: "code-agent" },
  { id: "long-16k-mixed", seed: 16_002, turns: 44, window: 16_385, keepTurns: 10, policy: "code-agent" },
  { id: "long-16k-zh", seed: 16_003, turns: 20, window: 16_385, keepTurns: 2, policy: "code-agent" }
]
for (const l of longSessions) {
  const { expect: _generated, ...session } = generateSession(l.seed, {
    long: true,
    curate: true,
    turns: l.turns,
    contextWindow: l.window,
    keepTurns: l.keepTurns,
    policy: l.policy,
    id: l.id,
    description: `${l.turns} ${l.policy} turns with tool outputs of 2-6k tokens (Read and Write of 60-170 long lines, Grep, failing Bash, LS), Chinese and English, a pinned turn and dismissed results; compaction on a ${l.window} window, keep ${l.keepTurns} (generator seed ${l.seed}).`
  })
  add(session)
}

// Many small turns: the 8k window cuts history within a few tokens of its limit, so a budget that
// allows a little slack (the exact-count repair over the available tokens) shows.
add({
  ...base(
    "many-small-turns",
    "200 short turns (a question and a one-line answer, English and Chinese): history is cut to fit the small windows within a few tokens of their limit.",
    "code-agent"
  ),
  settings: { keepTurns: 10 },
  systemPrompt: agentPrompt,
  files: { "CODE_LAW.md": codeLaw },
  turns: withUsage(
    Array.from({ length: 200 }, (_, i): Turn => {
      const topic = ["refunds", "invoices", "ledger entries", "payouts", "disputes"][i % 5]!
      return {
        user:
          i % 3 === 0
            ? `第 ${i + 1} 个问题：${chinese[i % 5]} 这和 ${topic} 有关吗？`
            : `Question ${i + 1}: where are ${topic} validated${i % 2 === 0 ? " before saving" : ""}?`,
        steps: [
          answer(
            i % 3 === 0
              ? `有关：${topic} 在 src/${topic.replace(/ /g, "-")}.ts 的第 ${10 + i} 行校验。`
              : `In src/${topic.replace(/ /g, "-")}.ts, line ${10 + i}, by the ${topic} schema${i % 4 === 0 ? " and the tenant check" : ""}.`
          )
        ]
      }
    }),
    200_000,
    10
  )
})

// --- generated sessions on which the gate once failed, kept as fixtures so every run replays them
const found: ReadonlyArray<{
  readonly seed: number
  readonly index: number
  readonly id: string
  readonly what: string
}> = [
  {
    seed: 3_405_005_490,
    index: 25,
    id: "found-error-placeholder",
    what: "a reduced turn keeps its error results whole, so its placeholders cost more than the bare call names"
  },
  {
    seed: 1_354_553_083,
    index: 1,
    id: "found-small-results",
    what: "turns whose tool results are shorter than their placeholders: a reduced turn must never be larger than the whole one"
  },
  {
    seed: 11,
    index: 1,
    id: "found-reduced-larger",
    what: "short tool results whose placeholders would cost more than the results: shown reduced, a turn would crowd out an earlier one that fits whole (the reduced-larger-than-whole mutant's session since compaction plans by the request's own count)"
  },
  {
    seed: 635_926_711,
    index: 25,
    id: "found-compaction-room",
    what: "an Anthropic request carries JSON tool results as strings inside its JSON blocks, about a tenth more than their text: compaction must plan the kept turns as that request counts them, or the first request after it is over the trigger"
  }
]
for (const f of found) {
  const s = generateSessions(f.seed, f.index)[f.index - 1]!
  add({ ...s, id: f.id, description: `${f.what} (generated: CTXO_EVAL_SEED=${f.seed}, session ${f.index}).` })
}

// --- what each profile is expected to do: the refusals the required minimum justifies (measured,
// then checked by the eval's refusal-justified invariant) and at least as many compiles as now.
for (const s of sessions) {
  const expected = expectations[s.id]
  if (expected !== undefined) (s as { expect?: RecordedSession["expect"] }).expect = expected
}

// --- write
mkdirSync(out, { recursive: true })
for (const f of readdirSync(out)) if (f.endsWith(".json")) rmSync(join(out, f))
for (const s of sessions) {
  writeFileSync(
    join(out, `${s.id}.json`),
    `${JSON.stringify({ $schema: "../../packages/replay/session.schema.json", ...s }, null, 2)}\n`
  )
}
console.log(`wrote ${sessions.length} sessions to ${out}`)
