/**
 * Writes the multi-session scenarios in fixtures/scenarios/ (ctxo.scenario/v1), replayed by
 * `pnpm eval` through the real services and checked by `@ctxo/replay/ScenarioInvariants`.
 * Deterministic: the same script writes the same bytes. Each scenario checks itself against the
 * format (`parseScenario`) before it is written.
 *
 *   node --import tsx/esm packages/replay/scripts/scenarios.ts
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Either } from "effect"
import type { NewSession, Scenario, ScenarioStep } from "../src/Scenario.ts"
import { parseScenario, SCENARIO_FORMAT } from "../src/Scenario.ts"
import { existingSessions } from "../src/ScenarioRun.ts"
import type { Step } from "../src/Session.ts"

const repo = fileURLToPath(new URL("../../..", import.meta.url))
const out = join(repo, "fixtures", "scenarios")

type Chat = Extract<ScenarioStep, { type: "chat" }>

/** A turn whose model answers in words only. */
const chat = (
  session: string,
  input: string,
  answer: string,
  extra: Partial<Pick<Chat, "tenant" | "expect">> = {}
): Chat => ({
  type: "chat",
  session,
  ...(extra.tenant === undefined ? {} : { tenant: extra.tenant }),
  input,
  replies: [{ type: "assistant", text: answer }],
  ...(extra.expect === undefined ? {} : { expect: extra.expect })
})

/** A turn whose model reads a file first (a tool call and its scripted result), then answers. */
const chatWithRead = (
  session: string,
  input: string,
  path: string,
  content: string,
  answer: string,
  extra: Partial<Pick<Chat, "tenant" | "expect">> = {}
): Chat => {
  const id = `call_${session}_${path.replace(/[^a-z0-9]/gi, "_")}`
  const replies: Array<Step> = [
    { type: "assistant", text: `Let me read ${path}.` },
    { type: "tool_call", id, name: "read_file", input: { path } },
    {
      type: "tool_result",
      callId: id,
      name: "read_file",
      result: { status: "success", data: { path, content, totalLines: content.split("\n").length } }
    },
    { type: "assistant", text: answer }
  ]
  return { ...chat(session, input, answer, extra), replies }
}

const longAnswer = (topic: string) =>
  `Here is the short version about ${topic}, then the details. ${Array.from(
    { length: 9 },
    (_, i) =>
      `Point ${i + 1}: keep the answer focused on what the user asked and leave out what they already know.`
  ).join(" ")}`

/**
 * The infra team's runbook: 120 services in 24 files, about 14,000 tokens, more than gpt-4 (8k) can
 * take, so its knowledge source asks for more than its share and a compile keeps only some files.
 */
const runbook = (): Record<string, string> => {
  const services = ["billing", "orders", "search", "auth", "ledger", "payouts", "reports", "mailer"]
  const files: Record<string, string> = {}
  for (let f = 0; f < 24; f++) {
    const lines = [`# Infra runbook, part ${f + 1}`, ""]
    for (let i = f * 5; i < f * 5 + 5; i++) {
      const service = `${services[i % services.length]}-${Math.floor(i / services.length) + 1}`
      const team = ["platform", "data", "payments"][i % 3]
      lines.push(
        `## ${service}`,
        "",
        `- Restart: \`kubectl rollout restart deploy/${service}\` in namespace \`prod-${i % 3}\`; wait for ${2 + (i % 4)} ready pods.`,
        `- Failover: promote the replica in zone ${["a", "b", "c"][i % 3]}; the primary's slot is dropped after ${10 + (i % 5) * 5} minutes.`,
        `- Backups: nightly at 0${1 + (i % 8)}:30 UTC to bucket \`backups-${service}\`, kept ${7 * (1 + (i % 4))} days.`,
        `- Alerts: page the ${team} on-call when p99 latency stays over ${200 + (i % 6) * 50} ms for 10 minutes.`,
        `- Owner: the ${team} team; escalation through the incident channel.`,
        ""
      )
    }
    files[`runbook/part-${String(f + 1).padStart(2, "0")}.md`] = lines.join("\n")
  }
  return files
}
const runbookFiles = runbook()

const systemPrompt =
  "You are the team's operations agent. Answer briefly and name the session a fact comes from."

// --- 1. aggregate across sessions: one ended, one of another tenant listed

const aggregateAcrossSessions: Scenario = {
  format: SCENARIO_FORMAT,
  id: "aggregate-three-sessions",
  description:
    "Three sessions of a tenant on top of the example data (one of them ended) and two of another tenant, one with the same id as ours; an aggregate listing another tenant's session is refused; the aggregate of ours skips the ended one and carries nothing of it or of the other tenant, each block naming its session and level or source",
  data: { from: "fixtures/data" },
  tenants: { acme: { files: { "system-prompt.md": "You are Acme's billing agent." } } },
  sessions: [
    { id: "release", concept: "Release train", metadata: { team: "release" } },
    {
      id: "infra",
      concept: "Database upgrades",
      metadata: { team: "infra" },
      files: runbookFiles,
      manifest: { knowledge: Object.keys(runbookFiles).map((path) => ({ path })) }
    },
    { id: "legacy", concept: "The old deploy pipeline", metadata: { team: "release" } },
    { id: "infra", tenant: "acme", concept: "Acme infrastructure" },
    { id: "acme-billing", tenant: "acme", concept: "Acme billing cutover" }
  ],
  steps: [
    chat(
      "release",
      "Remember: the release train leaves every Thursday at 15:00 UTC, never on Fridays.",
      "Noted: the release train leaves on Thursdays at 15:00 UTC and never on Fridays.",
      { expect: { important: true } }
    ),
    chat("release", "ok thanks", "You're welcome.", { expect: { important: false } }),
    chatWithRead(
      "infra",
      "We decided to pin Postgres to 16.4 for the next release; check the upgrade notes.",
      "docs/upgrade.md",
      "# Upgrade notes\n\nPostgres 16.4 fixes the replication slot leak we hit in March.\n",
      "The upgrade notes say 16.4 fixes the replication slot leak; pinning Postgres 16.4 is recorded.",
      { expect: { important: true } }
    ),
    chat(
      "infra",
      "Which team owns the rollback runbook for the database?",
      "The platform team owns the rollback runbook for the database."
    ),
    chat(
      "legacy",
      "Remember that LEGACY-ONLY deploys still go through tools/deploy-legacy.sh v2.3 on the bastion host.",
      "Noted: LEGACY-ONLY deploys run tools/deploy-legacy.sh on the bastion host.",
      { expect: { important: true } }
    ),
    chat(
      "infra",
      "ACME-SECRET: remember our billing cutover database is billing-db-7 on 2026-12-01.",
      "Noted: the billing cutover uses billing-db-7 on 2026-12-01.",
      { tenant: "acme", expect: { important: true } }
    ),
    chat(
      "acme-billing",
      "ACME-SECRET: we decided invoices freeze at 18:00 on the cutover day.",
      "Noted: invoices freeze at 18:00 on the cutover day.",
      { tenant: "acme", expect: { important: true } }
    ),
    { type: "end", session: "legacy" },
    {
      type: "aggregate",
      sessions: ["release", "infra", "acme-billing"],
      query: "When does the release train leave and which Postgres version is pinned?",
      expect: { error: "SessionNotFound" }
    },
    {
      type: "aggregate",
      sessions: ["release", "infra", "legacy", "code-agent-auth"],
      query: "When does the release train leave and which Postgres version is pinned?"
    },
    {
      type: "aggregate",
      sessions: ["infra", "release"],
      query: "Where do deploys of the old pipeline run, and on which host?"
    },
    {
      type: "aggregate",
      tenant: "acme",
      sessions: ["infra", "acme-billing"],
      query: "When is the billing cutover and when do invoices freeze?"
    }
  ]
}

// --- 2. distribution (broadcast and filtered) with pause, resume and end

const distributeLifecycle: Scenario = {
  format: SCENARIO_FORMAT,
  id: "distribute-lifecycle",
  description:
    "Tasks distributed by broadcast (retried with the same key) and by filter while sessions are paused, resumed and ended: a paused session takes tasks but no turns, an ended one takes neither, another tenant's sessions of the same metadata get nothing",
  data: { files: { "system-prompt.md": systemPrompt } },
  tenants: { acme: { files: { "system-prompt.md": "You are Acme's tutor." } } },
  sessions: [
    { id: "physics-a", concept: "Quantum homework", metadata: { team: "physics", level: "intro" } },
    { id: "physics-b", concept: "Thermodynamics notes", metadata: { team: "physics" } },
    { id: "ops", concept: "On-call handover", metadata: { team: "ops" } },
    { id: "physics-old", concept: "Quantum exam 2025", metadata: { team: "physics" } },
    { id: "physics-a", tenant: "acme", concept: "Quantum homework", metadata: { team: "physics" } }
  ],
  steps: [
    chat("physics-a", "What does the wave function describe?", "The state of a quantum system."),
    { type: "pause", session: "physics-b" },
    {
      ...chat("physics-b", "Still there?", "Yes."),
      expect: { error: "SessionNotActive" }
    },
    {
      type: "distribute",
      mode: "broadcast",
      task: { title: "Write a status note", description: "Two lines: done, next." },
      idempotencyKey: "status-1"
    },
    {
      type: "distribute",
      mode: "broadcast",
      task: { title: "Write a status note", description: "Two lines: done, next." },
      idempotencyKey: "status-1"
    },
    { type: "end", session: "physics-old" },
    {
      type: "distribute",
      mode: "filtered",
      task: { title: "Check the units" },
      filter: { metadata: { team: "physics" } }
    },
    {
      type: "distribute",
      mode: "filtered",
      task: { title: "Intro problems only" },
      sessions: ["physics-a", "physics-b", "ops", "physics-old", "ghost"],
      filter: { metadata: { level: "intro" }, concept: "quantum" }
    },
    {
      type: "distribute",
      mode: "filtered",
      task: { title: "Intro physics reading" },
      filter: { metadata: { team: "physics", level: "intro" } }
    },
    {
      type: "distribute",
      mode: "broadcast",
      task: { title: "Hand over to physics" },
      fromSession: "ops"
    },
    { type: "resume", session: "physics-b" },
    chat("physics-b", "Is entropy a state function?", "Yes, entropy is a state function."),
    { type: "addTask", session: "physics-a", title: "Review chapter 2", as: "review" },
    { type: "updateTask", session: "physics-a", task: "review", status: "in_progress" },
    { type: "end", session: "physics-a" },
    {
      type: "updateTask",
      session: "physics-a",
      task: "review",
      status: "done",
      expect: { error: "SessionNotActive" }
    },
    {
      ...chat("physics-a", "One more question?", "Sure."),
      expect: { error: "SessionNotActive" }
    },
    {
      type: "addTask",
      session: "physics-old",
      title: "Too late",
      expect: { error: "SessionNotActive" }
    },
    {
      type: "distribute",
      mode: "filtered",
      tenant: "acme",
      task: { title: "Check the units" },
      filter: { metadata: { team: "physics" } }
    },
    {
      type: "aggregate",
      sessions: ["physics-a", "physics-b", "ops"],
      query: "Which tasks are open and is entropy a state function?"
    }
  ]
}

// --- 3. promotion: important turns, small talk, a pin, a deletion, then the end persists to L4

const promotion: Scenario = {
  format: SCENARIO_FORMAT,
  id: "promotion-to-l4",
  description:
    "Turns worth remembering go to L2 at the end of their turn, small talk and a borderline turn (0.6, not over it) do not, a pinned small-talk turn does, a deleted entry goes no further; ending the session aggregates its L2 into L3 and persists it to L4",
  data: { files: { "system-prompt.md": systemPrompt } },
  sessions: [
    { id: "planner", concept: "Planning the offsite", metadata: { team: "people" } },
    { id: "helper", concept: "Side questions" }
  ],
  steps: [
    chat("planner", "hi", "Hello! How can I help?", { expect: { important: false } }),
    chat(
      "planner",
      "I prefer metric units in every plan, always; Maria agreed.",
      "Understood: metric units in every plan from now on.",
      { expect: { important: true } }
    ),
    chat(
      "planner",
      "We decided the offsite budget is €12,000 for 30 people.",
      "Recorded: an offsite budget of €12,000 for 30 people.",
      { expect: { important: true } }
    ),
    // The user states a rule (0.5) and the answer is substantive (0.1): 0.6, not over the threshold.
    chat("planner", "Remember to keep it short.", longAnswer("keeping answers short"), {
      expect: { important: false }
    }),
    chat("planner", "thanks!", "Any time.", { expect: { important: false } }),
    chatWithRead(
      "planner",
      "Important: the venue list failed to load yesterday; the root cause was a typo in venues.md, fixed now. Write down the venue.",
      "venues.md",
      "# Venues\n\n- Lisbon, LX Factory (capacity 40)\n",
      "Fixed: the root cause was the typo; the venue is LX Factory in Lisbon, capacity 40.",
      { expect: { important: true } }
    ),
    { type: "pinMemory", level: "L1", session: "planner", turn: 5 },
    { type: "deleteMemory", level: "L2", session: "planner", turn: 3 },
    chat("helper", "What time is it in Lisbon?", "Lisbon is on WET, UTC+0 in winter.", {
      expect: { important: false }
    }),
    {
      type: "aggregate",
      sessions: ["planner", "helper"],
      query: "Which units do plans use, and where is the venue?"
    },
    { type: "end", session: "planner" },
    { type: "persist" },
    {
      type: "aggregate",
      sessions: ["helper"],
      query: "Which units do plans use, and where is the venue?"
    }
  ]
}

// --- 4. restart: L4 unchanged and a source of a new session's compile

const restart: Scenario = {
  format: SCENARIO_FORMAT,
  id: "restart-keeps-l4",
  description:
    "Important turns of a session that ends reach L4; the services restart (8 days later: L2 and L3 have expired) and L4 is unchanged; a new session's turn about the same subject draws on L4; a second restart changes nothing",
  data: { files: { "system-prompt.md": systemPrompt } },
  sessions: [{ id: "travel", concept: "Offsite travel", metadata: { team: "people" } }],
  steps: [
    chat(
      "travel",
      "We decided the offsite is in Lisbon on 2026-05-14, remember that.",
      "Recorded: the offsite is in Lisbon on 2026-05-14.",
      { expect: { important: true } }
    ),
    chat(
      "travel",
      "Remember: everyone flies economy and books through the Navigator portal.",
      "Noted: economy for everyone, booked through the Navigator portal.",
      { expect: { important: true } }
    ),
    chat("travel", "cool", "👍", { expect: { important: false } }),
    { type: "end", session: "travel" },
    { type: "pinMemory", level: "L4", matching: "Navigator portal" },
    { type: "restart", advanceMs: 8 * 24 * 3_600_000 },
    {
      type: "createSession",
      id: "travel-2",
      concept: "Offsite logistics, second round",
      metadata: { team: "people" }
    },
    chat(
      "travel-2",
      "Where and when is the offsite, and how do people book flights?",
      "Lisbon on 2026-05-14; economy through the Navigator portal.",
      { expect: { fromL4: ["Lisbon on 2026-05-14", "Navigator portal"] } }
    ),
    { type: "restart" },
    chat("travel-2", "Remind me: where is the offsite?", "Lisbon.", {
      expect: { fromL4: ["Lisbon on 2026-05-14"] }
    }),
    {
      type: "aggregate",
      sessions: ["travel-2"],
      query: "Where and when is the offsite?"
    }
  ]
}

// --- 5-8. plan-execute-reflect runs (seed 004): a simple goal answered directly (then replayed by
// its key, then refused while paused), a 3-step plan whose specialists see only what they depend
// on, a plan adjusted after reflection, and the reflection limit reached. The model's answers are
// scripted per role; each specialist's replies by step id (words, tool calls, tool results).

const releaseSession: NewSession = {
  id: "release",
  concept: "Release train",
  metadata: {
    team: "release"
  },
  files: {
    "notes.md":
      "# Release notes v2.4\n\n- Compaction keeps the last 10 whole turns.\n- Budget shares can be set per deployment.\n- The gateway streams runs as Server-Sent Events.\n"
  }
}

const runScenario = (id: string, description: string, steps: ReadonlyArray<ScenarioStep>): Scenario => ({
  format: SCENARIO_FORMAT,
  id,
  description,
  data: { from: "fixtures/data" },
  sessions: [releaseSession],
  steps
})

const runSimple = runScenario(
  "run-simple",
  "A goal one answer can do: judged simple and answered directly (no plan, no specialist); asked again with the same key it answers from history, recording nothing twice; a run whose planner answers prose fails, and the same key resumes it at the plan without judging again; a paused session refuses a run before anything is recorded",
  [
    {
      type: "run",
      session: "release",
      goal: "What does compaction keep in v2.4?",
      idempotencyKey: "simple-1",
      model: {
        judge: [
          {
            complexity: "simple",
            reason: "one fact from the release notes"
          }
        ],
        answerer: ["Compaction keeps the last 10 whole turns, and summarises the older ones."]
      },
      expect: {
        complexity: "simple",
        phases: ["start", "analyze", "judge", "answer-directly", "done"],
        plans: 0,
        reflections: 0
      }
    },
    {
      type: "run",
      session: "release",
      goal: "What does compaction keep in v2.4?",
      idempotencyKey: "simple-1",
      model: {},
      expect: {
        complexity: "simple"
      }
    },
    {
      type: "run",
      session: "release",
      goal: "Check the release notes for typos, then fix them",
      idempotencyKey: "resume-1",
      model: {
        judge: [{ complexity: "complex", reason: "check, then fix" }],
        planner: ["First I would read the notes carefully."]
      },
      expect: { error: "RunReplyInvalid" }
    },
    {
      type: "run",
      session: "release",
      goal: "Check the release notes for typos, then fix them",
      idempotencyKey: "resume-1",
      model: {
        planner: [
          {
            steps: [
              { id: "check", title: "Check", instruction: "List the typos in notes.md", dependsOn: [] },
              { id: "fix", title: "Fix", instruction: "Fix the typos found", dependsOn: ["check"] }
            ]
          }
        ],
        reflector: [{ decision: "finish", feedback: "Both are done." }],
        answerer: ["The notes had no typos left after the fix."],
        specialists: {
          check: [{ type: "assistant", text: "TYPOS: 'Sever-Sent' should be 'Server-Sent'." }],
          fix: [{ type: "assistant", text: "FIXED: 'Server-Sent Events' is spelled right now." }]
        }
      },
      expect: {
        complexity: "complex",
        phases: [
          "start",
          "analyze",
          "judge",
          "plan",
          "failed",
          "plan",
          "execute",
          "collect",
          "feedback",
          "reflect",
          "final-answer",
          "done"
        ],
        plans: 1,
        reflections: 1,
        results: ["check", "fix"]
      }
    },
    {
      type: "pause",
      session: "release"
    },
    {
      type: "run",
      session: "release",
      goal: "List the v2.4 changes",
      model: {},
      expect: {
        error: "SessionNotActive"
      }
    },
    {
      type: "resume",
      session: "release"
    }
  ]
)

const runThreeSteps = runScenario(
  "run-three-steps",
  "A 3-step plan: the specialist of the changes reads the notes with a tool; the notes and the checklist each depend on the changes only, so each sees that result and not its sibling's; one reflection finishes; the final answer is recorded once",
  [
    {
      type: "run",
      session: "release",
      goal: "Prepare the v2.4 release: list the changes, write the release notes, then draft the upgrade checklist",
      idempotencyKey: "three-1",
      model: {
        judge: [
          {
            complexity: "complex",
            reason: "three pieces of work"
          }
        ],
        planner: [
          {
            steps: [
              {
                id: "changes",
                title: "List the changes",
                instruction: "List every change of v2.4 from notes.md",
                dependsOn: []
              },
              {
                id: "notes",
                title: "Write the release notes",
                instruction: "Write release notes for users from the list of changes",
                dependsOn: ["changes"]
              },
              {
                id: "checklist",
                title: "Draft the upgrade checklist",
                instruction: "Draft an upgrade checklist for operators from the list of changes",
                dependsOn: ["changes"]
              }
            ],
            rationale: "the notes and the checklist both start from the changes"
          }
        ],
        reflector: [
          {
            decision: "finish",
            feedback: "The notes and the checklist cover the goal."
          }
        ],
        answerer: [
          "v2.4 is ready: release notes for users (compaction, budget shares, streamed runs) and an upgrade checklist for operators."
        ],
        specialists: {
          changes: [
            {
              type: "assistant",
              text: "Reading the notes."
            },
            {
              type: "tool_call",
              id: "call_notes_1",
              name: "read_file",
              input: {
                path: "notes.md"
              }
            },
            {
              type: "tool_result",
              callId: "call_notes_1",
              name: "read_file",
              result: {
                status: "success",
                data: {
                  content:
                    "- Compaction keeps the last 10 whole turns.\n- Budget shares can be set per deployment.\n- The gateway streams runs as Server-Sent Events."
                }
              }
            },
            {
              type: "assistant",
              text: "CHANGES: compaction keeps 10 whole turns; budget shares per deployment; runs stream as SSE."
            }
          ],
          notes: [
            {
              type: "assistant",
              text: "NOTES: ctxo v2.4 keeps your last ten turns whole, lets you set budget shares, and streams runs."
            }
          ],
          checklist: [
            {
              type: "assistant",
              text: "CHECKLIST: set CTXO_BUDGET_SHARES if you override shares; allow text/event-stream for /runs."
            }
          ]
        }
      },
      expect: {
        complexity: "complex",
        plans: 1,
        reflections: 1,
        results: ["changes", "notes", "checklist"],
        phases: [
          "start",
          "analyze",
          "judge",
          "plan",
          "execute",
          "collect",
          "feedback",
          "reflect",
          "final-answer",
          "done"
        ]
      }
    }
  ]
)

const runAdjusted = runScenario(
  "run-adjusted",
  "A plan adjusted after reflection: the first estimate lacks numbers, the reflector adjusts, the new plan keeps the finished research step (not run again) and adds a new estimate and a review; the second reflection finishes",
  [
    {
      type: "run",
      session: "release",
      goal: "Estimate the cost of moving the gateway to two replicas, then review the estimate",
      idempotencyKey: "adjusted-1",
      model: {
        judge: [
          {
            complexity: "complex",
            reason: "research then estimate"
          }
        ],
        planner: [
          {
            steps: [
              {
                id: "research",
                title: "Research the costs",
                instruction: "Find what a replica costs per month",
                dependsOn: []
              },
              {
                id: "estimate",
                title: "Estimate",
                instruction: "Estimate the monthly cost of two replicas",
                dependsOn: ["research"]
              }
            ]
          }
        ],
        replanner: [
          {
            steps: [
              {
                id: "research",
                title: "Research the costs",
                instruction: "Find what a replica costs per month",
                dependsOn: []
              },
              {
                id: "estimate",
                title: "Estimate with numbers",
                instruction: "Estimate the monthly cost of two replicas with a number per item",
                dependsOn: ["research"]
              },
              {
                id: "review",
                title: "Review",
                instruction: "Review the estimate for missing items",
                dependsOn: ["estimate"]
              }
            ],
            rationale: "the estimate needs numbers and a review"
          }
        ],
        reflector: [
          {
            decision: "adjust",
            feedback: "The estimate has no numbers."
          },
          {
            decision: "finish",
            feedback: "The reviewed estimate answers the goal."
          }
        ],
        answerer: [
          "Two replicas cost about 460 USD a month (2 x 180 compute, 100 database); the review found nothing missing."
        ],
        specialists: {
          research: [
            {
              type: "assistant",
              text: "RESEARCH: one replica is 180 USD a month of compute; the shared database is 100 USD."
            }
          ],
          estimate: [
            {
              type: "assistant",
              text: "ESTIMATE: roughly twice the current cost."
            }
          ],
          "estimate-v2": [
            {
              type: "assistant",
              text: "ESTIMATE-V2: 2 x 180 + 100 = 460 USD a month."
            }
          ],
          review: [
            {
              type: "assistant",
              text: "REVIEW: the estimate covers compute and database; nothing is missing."
            }
          ]
        }
      },
      expect: {
        complexity: "complex",
        plans: 2,
        reflections: 2,
        results: ["research", "estimate", "estimate-v2", "review"],
        phases: [
          "start",
          "analyze",
          "judge",
          "plan",
          "execute",
          "collect",
          "feedback",
          "reflect",
          "update-plan",
          "execute",
          "collect",
          "feedback",
          "reflect",
          "final-answer",
          "done"
        ]
      }
    }
  ]
)

const runReflectionLimit = runScenario(
  "run-reflection-limit",
  "The reflection limit reached: a reflector never satisfied keeps adjusting; after 2 reflections (the run's limit) the orchestrator stops asking it and the answer is written from the results there are; the loop ends",
  [
    {
      type: "run",
      session: "release",
      goal: "Write the perfect tagline for v2.4, then polish it",
      idempotencyKey: "limit-1",
      limits: {
        maxReflections: 2
      },
      model: {
        judge: [
          {
            complexity: "complex",
            reason: "write then polish"
          }
        ],
        planner: [
          {
            steps: [
              {
                id: "draft",
                title: "Draft",
                instruction: "Draft a tagline for v2.4",
                dependsOn: []
              }
            ]
          }
        ],
        replanner: [
          {
            steps: [
              {
                id: "draft",
                title: "Draft",
                instruction: "Draft a tagline for v2.4",
                dependsOn: []
              },
              {
                id: "polish",
                title: "Polish",
                instruction: "Polish the tagline",
                dependsOn: ["draft"]
              }
            ]
          },
          {
            steps: [
              {
                id: "draft",
                title: "Draft",
                instruction: "Draft a tagline for v2.4",
                dependsOn: []
              },
              {
                id: "polish",
                title: "Polish",
                instruction: "Polish the tagline",
                dependsOn: ["draft"]
              },
              {
                id: "polish-more",
                title: "Polish more",
                instruction: "Polish the tagline again",
                dependsOn: ["polish"]
              }
            ]
          }
        ],
        reflector: [
          {
            decision: "adjust",
            feedback: "Not perfect yet."
          },
          {
            decision: "adjust",
            feedback: "Still not perfect."
          },
          {
            decision: "adjust",
            feedback: "Never asked: the limit is reached."
          }
        ],
        answerer: ["ctxo v2.4: every token where it counts."],
        specialists: {
          draft: [
            {
              type: "assistant",
              text: "DRAFT: ctxo v2.4, the context you meant to send."
            }
          ],
          polish: [
            {
              type: "assistant",
              text: "POLISHED: ctxo v2.4, every token where it counts."
            }
          ],
          "polish-more": [
            {
              type: "assistant",
              text: "POLISHED-AGAIN: ctxo v2.4: every token where it counts."
            }
          ]
        }
      },
      expect: {
        complexity: "complex",
        plans: 3,
        reflections: 2,
        results: ["draft", "polish", "polish-more"]
      }
    }
  ]
)

const scenarios: ReadonlyArray<Scenario> = [
  aggregateAcrossSessions,
  distributeLifecycle,
  promotion,
  restart,
  runSimple,
  runThreeSteps,
  runAdjusted,
  runReflectionLimit
]

mkdirSync(out, { recursive: true })
for (const f of readdirSync(out)) if (f.endsWith(".json")) rmSync(join(out, f))
for (const s of scenarios) {
  const file = join(out, `${s.id}.json`)
  const text = `${JSON.stringify({ $schema: "../../packages/replay/scenario.schema.json", ...s }, null, 2)}\n`
  const parsed = parseScenario(text, file, existingSessions(s, repo))
  if (Either.isLeft(parsed)) throw new Error(parsed.left.message)
  writeFileSync(file, text)
}
console.log(`wrote ${scenarios.length} scenarios to ${out}`)
