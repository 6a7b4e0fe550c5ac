/**
 * The mutation suite's mutants (`pnpm eval:mutants`, run by `../mutants.ts`): one-line bugs a
 * developer could write in the compiler, history and budget code, in the many-session code of the
 * agent (aggregate, memory levels, the controller; caught by the scenario suite), and the gate's
 * breakers. Each is
 * applied alone to a temporary copy of the repository; `pnpm eval` must then fail and name one of
 * the invariants in `catches`.
 *
 * A source mutant replaces `find` (which must occur exactly once in `file`, else the mutant "does
 * not apply" and the suite fails: rewrite it against the new code) by `replace`. A breaker mutant
 * runs the eval with `CTXO_EVAL_BREAK` (the layers of `@ctxo/replay/Breakers`).
 *
 * `sessions` is the subset of fixtures (recorded sessions and scenarios, by file name) the eval
 * replays for that mutant (chosen to exercise the code it breaks; all of them when absent);
 * `gateway` also runs the gateway suite.
 */

export interface SourceMutant {
  readonly name: string
  /** The bug, as a reviewer would describe it. */
  readonly bug: string
  readonly file: string
  readonly find: string
  readonly replace: string
  /** Any of these invariants naming it counts as caught (the first is the one meant to). */
  readonly catches: ReadonlyArray<string>
  readonly sessions?: ReadonlyArray<string>
  readonly gateway?: boolean
}

export interface BreakerMutant {
  readonly name: string
  readonly bug: string
  readonly breaker: string
  readonly catches: ReadonlyArray<string>
  readonly sessions?: ReadonlyArray<string>
  readonly gateway?: boolean
}

export type Mutant = SourceMutant | BreakerMutant

/** Fixtures that compact on small windows (long sessions, keepTurns over the budget). */
const COMPACTING = [
  "long-migration-compacts",
  "budget-over-keep-turns",
  "dismiss-and-pin",
  "long-8k-notebook",
  "long-16k-zh"
]
/** Fixtures whose requests come close to a small window's limit. */
const TIGHT = [
  "long-8k-reads",
  "long-8k-notebook",
  "long-16k-zh",
  "long-16k-reads",
  "long-16k-mixed",
  "budget-over-keep-turns",
  "read-3000-lines"
]

export const mutants: ReadonlyArray<Mutant> = [
  // --- issue 15, part 2: the regressions the gate missed
  {
    name: "rules-skipped-after-summary",
    bug: "CODE_LAW.md (rules) is skipped once history has a summary",
    file: "packages/compiler/src/ContextSource.ts",
    find: "const file = findRulesFile(c.sessionFiles)\n    if (file === undefined) return []",
    replace:
      "const file = findRulesFile(c.sessionFiles)\n    if (file === undefined || c.summaries.length > 0) return []",
    catches: ["always-present"],
    sessions: COMPACTING
  },
  {
    name: "tool-call-arguments-not-counted",
    bug: "a tool call's arguments are not counted in a request's tokens",
    file: "packages/budget/src/ChatFormat.ts",
    find: "total += framing.perToolCall + count(call.name) + count(call.arguments)",
    replace: "total += framing.perToolCall + count(call.name)",
    catches: ["budget"],
    sessions: TIGHT
  },
  {
    name: "retry-appends-input",
    bug: "a retry after a crash appends the input again instead of resuming the turn",
    file: "packages/history/src/Turns.ts",
    find: "  if (existing !== undefined) {",
    replace: "  if (existing !== undefined && existing.finished) {",
    catches: ["input-once"],
    sessions: ["crash-and-retry", "repeated-input"]
  },
  {
    name: "summary-not-stored",
    bug: "compaction archives the turns but does not store the summary",
    file: "packages/history/src/Compaction.ts",
    find: "compression: summary === undefined ? doc.compression : [...doc.compression, summary]",
    replace: "compression: doc.compression",
    catches: ["summary-coverage", "keep-turns"],
    sessions: COMPACTING
  },
  {
    name: "pinned-turn-archived",
    bug: "compaction archives a pinned turn",
    file: "packages/history/src/Compaction.ts",
    find: "const archivedTurns = live.slice(0, keptFrom).filter((t) => !pinned(t))",
    replace: "const archivedTurns = live.slice(0, keptFrom)",
    catches: ["always-present", "keep-turns"],
    sessions: ["dismiss-and-pin"]
  },
  {
    name: "reminders-not-capped",
    bug: "the @file reminder names every mention instead of at most 5",
    file: "packages/compiler/src/Mentions.ts",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the mutated source text
    find: "const named = mentions.slice(0, MAX_NAMED_MENTIONS).map((m) => `@${m}`)",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the mutated source text
    replace: "const named = mentions.map((m) => `@${m}`)",
    catches: ["reminders"],
    sessions: ["mentions-many", "fix-login-bug"]
  },
  {
    name: "reminders-not-deduplicated",
    bug: "a file mentioned twice is named twice in the reminder",
    file: "packages/compiler/src/Mentions.ts",
    find: 'if (path !== "" && !out.includes(path)) out.push(path)',
    replace: 'if (path !== "") out.push(path)',
    catches: ["reminders"],
    sessions: ["mentions-many", "fix-login-bug"]
  },
  {
    name: "error-result-normalized",
    bug: "history normalizes a tool's error to its message (the code is dropped)",
    file: "packages/history/src/ToolResultCompressor.ts",
    find: "...(result.error === undefined ? {} : { error: result.error }),",
    replace: "...(result.error === undefined ? {} : { error: { message: result.error.message } }),",
    catches: ["compression"],
    sessions: ["bash-400-stderr", "chinese-code-agent"]
  },
  {
    name: "date-in-system-prompt",
    bug: "today's date is added to the system prompt (the cached prefix changes every day)",
    file: "packages/compiler/src/internal/resolveSources.ts",
    find: 'systemPrompt: globalPrompts.join("\\n\\n")',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the mutated source text
    replace: 'systemPrompt: [...globalPrompts, `Today is ${new Date().toDateString()}.`].join("\\n\\n")',
    catches: ["determinism"],
    sessions: ["fix-login-bug", "layered-knowledge"]
  },
  {
    name: "gpt-4o-counted-with-cl100k",
    bug: "gpt-4o is counted with cl100k_base instead of o200k_base",
    file: "packages/budget/src/internal/defaultModels.ts",
    find: 'openai("gpt-4o", "o200k_base",',
    replace: 'openai("gpt-4o", "cl100k_base",',
    catches: ["budget"],
    sessions: ["fix-login-bug", "chinese-code-agent", "chinese-notebook"]
  },
  {
    name: "output-reserve-is-max-output",
    bug: "the output reserve is the model's max output instead of 10% of the window",
    file: "packages/budget/src/Budget.ts",
    find: "...(options.outputReserve === undefined ? {} : { outputReserve: options.outputReserve }),",
    replace: "outputReserve: options.outputReserve ?? model.maxOutput,",
    catches: ["refusal-justified", "budget", "compiles", "no-compiles"],
    sessions: ["fix-login-bug", "repeated-input"]
  },
  {
    name: "repair-slack-8",
    // The planner keeps every plan under the limit by units, so the final check only bites when
    // the exact count is wrong: the slack goes where the exact count of the assembled request is.
    bug: "the exact count the budget repair checks allows 8 tokens of slack",
    file: "packages/compiler/src/internal/selectBlocks.ts",
    find: "          onRight: (composition) => counting.countRequest(formatter.render(composition))",
    replace: "          onRight: (composition) => counting.countRequest(formatter.render(composition)) - 8",
    catches: ["budget"],
    sessions: TIGHT
  },
  {
    name: "estimate-margin-ignored",
    bug: "the safety margin of an estimated tokenizer is ignored",
    file: "packages/budget/src/Budget.ts",
    find: "    margin: counter.margin,",
    replace: "    margin: 0,",
    catches: ["budget"],
    sessions: ["fix-login-bug", "layered-knowledge"]
  },
  {
    name: "summary-room-not-reserved",
    bug: "compaction planning does not reserve room for the summary it is about to write",
    file: "packages/history/src/Compaction.ts",
    find: "const summaryReserve = Math.min(2_000, Math.floor(decision.threshold / 3))",
    replace: "const summaryReserve = 0",
    // A compaction that leaves no room: its first request over the trigger, or the summary cut
    // to nothing to fit (keep-turns checks both).
    catches: ["keep-turns", "keep-what-fits", "summary-coverage", "budget"],
    sessions: COMPACTING
  },
  // --- more of the same kind
  {
    name: "time-in-system-prompt",
    bug: "the current time is added to the system prompt",
    file: "packages/compiler/src/internal/resolveSources.ts",
    find: 'systemPrompt: globalPrompts.join("\\n\\n")',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the mutated source text
    replace: 'systemPrompt: [...globalPrompts, `Now: ${new Date().toISOString()}`].join("\\n\\n")',
    catches: ["determinism"],
    sessions: ["fix-login-bug", "layered-knowledge"]
  },
  {
    name: "policy-todo-before-query",
    bug: "the code-agent policy puts the todo recap before the input",
    file: "packages/compiler/src/Composer.ts",
    find: '      "query",\n      "todo__context"\n',
    replace: '      "todo__context",\n      "query"\n',
    catches: ["order"],
    sessions: ["todo-recap", "fix-login-bug"]
  },
  {
    name: "read-limit-5000",
    bug: "history keeps 5,000 lines of a Read instead of 500",
    file: "packages/history/src/ToolResultCompressor.ts",
    find: "  readLines: 500,",
    replace: "  readLines: 5000,",
    // The compression invariant's limits are written in the eval (COMPRESSION_LIMITS), so it
    // names the mutant itself.
    catches: ["compression", "compiles"],
    sessions: ["read-3000-lines"]
  },
  {
    name: "render-drops-error",
    bug: "the renderer leaves a tool result's error out",
    file: "packages/compiler/src/Render.ts",
    find: "    ...(part.error === undefined ? {} : { error: part.error })\n  })",
    replace: "  })",
    catches: ["compression"],
    sessions: ["bash-400-stderr", "chinese-code-agent"]
  },
  {
    name: "history-gap",
    bug: "the hysteresis cut drops earlier turns that no shown summary covers (a gap in history)",
    file: "packages/compiler/src/internal/selectBlocks.ts",
    find: "        while (from < candidates.length && covered(candidates[from]!) && whole > cut) {",
    replace: "        while (from < candidates.length && whole > cut) {",
    catches: ["keep-what-fits", "summary-coverage"],
    sessions: TIGHT
  },
  {
    name: "reduced-larger-than-whole",
    bug: "a turn is shown reduced even when its placeholders take more than the results they replace",
    file: "packages/compiler/src/internal/selectBlocks.ts",
    find: "      if (u.tokens >= whole.tokens) u = whole",
    replace: "      if (u.tokens < 0) u = whole",
    catches: ["keep-what-fits"],
    sessions: ["found-small-results", "found-reduced-larger"]
  },
  {
    name: "reserve-ratio-1-percent",
    bug: "the default output reserve is 1% of the window instead of 10%",
    file: "packages/budget/src/Allocation.ts",
    find: "export const DEFAULT_OUTPUT_RESERVE_RATIO = 0.1",
    replace: "export const DEFAULT_OUTPUT_RESERVE_RATIO = 0.01",
    catches: ["budget"],
    sessions: ["fix-login-bug", "repeated-input"]
  },
  {
    name: "history-counted-as-text",
    bug: "compaction counts the kept history as its text, whatever the format of the request that carries it",
    file: "packages/history/src/Compaction.ts",
    find: "const countHistory = options.countHistory ?? estimateHistory(count)",
    replace: "const countHistory = estimateHistory(count)",
    // An Anthropic request sends JSON tool results as strings inside JSON blocks: the first request
    // after the compaction is over the trigger.
    catches: ["keep-turns"],
    sessions: ["found-compaction-room"]
  },
  {
    name: "keep-one-turn-fewer",
    bug: "compaction keeps one turn fewer than keepTurns",
    file: "packages/history/src/Compaction.ts",
    find: "let keptCount = Math.min(keepTurns, live.length)",
    replace: "let keptCount = Math.min(keepTurns - 1, live.length)",
    catches: ["keep-turns", "keep-what-fits"],
    sessions: COMPACTING
  },
  // --- many sessions: the scenario suite (fixtures/scenarios, @ctxo/replay/ScenarioInvariants)
  {
    name: "aggregate-ended-not-skipped",
    bug: "an aggregate compiles an ended session like the others instead of skipping it",
    file: "packages/agent/src/Aggregate.ts",
    find: 'record.state === "ended"',
    replace: 'record.state === "ended" && false',
    catches: ["no-foreign-blocks", "provenance"],
    sessions: ["aggregate-three-sessions"]
  },
  {
    name: "ended-memory-not-withheld",
    bug: "an aggregate keeps a memory whose every origin is an ended session",
    file: "packages/agent/src/Aggregate.ts",
    find: "const kept = all.filter((b) => !fromEndedOnly(b.provenance, originsOf, ended))",
    replace: "const kept = all",
    catches: ["no-foreign-blocks"],
    sessions: ["aggregate-three-sessions"]
  },
  {
    name: "aggregate-heading-without-session",
    bug: "an aggregated block's heading names its source but not the session it comes from",
    file: "packages/agent/src/Aggregate.ts",
    find: "const named = block.provenance.slice(0, HEADING_PROVENANCES).map(provenanceText)",
    replace: "const named = block.provenance.slice(0, HEADING_PROVENANCES).map((p) => p.source)",
    catches: ["provenance"],
    sessions: ["aggregate-three-sessions"]
  },
  {
    name: "surplus-beyond-pool",
    bug: "a source with unmet demand is given surplus beyond what the other sources left",
    file: "packages/budget/src/Allocation.ts",
    find: "const extra = Math.min(s.ask - grants.get(s.id)!, pool)",
    replace: "const extra = s.ask - grants.get(s.id)!",
    catches: ["shares-respected"],
    sessions: ["aggregate-three-sessions"]
  },
  {
    name: "promotes-at-0.5",
    bug: "turns are promoted to L2 at an importance over 0.5 instead of 0.6",
    file: "packages/history/src/Importance.ts",
    find: "export const PROMOTION_THRESHOLD = 0.6",
    replace: "export const PROMOTION_THRESHOLD = 0.5",
    catches: ["promotion"],
    sessions: ["promotion-to-l4"]
  },
  {
    name: "l4-expires-as-l3",
    bug: "global memory (L4) gets the lifetime of agent-level memory (L3) instead of never expiring",
    file: "packages/agent/src/Memory.ts",
    find: 'if (entry.pinned === true || entry.level === "L4") return false\n  const ttl = settings.ttl[entry.level]',
    replace:
      'if (entry.pinned === true) return false\n  const ttl = settings.ttl[entry.level === "L4" ? "L3" : entry.level]',
    catches: ["l4-survives-restart"],
    sessions: ["restart-keeps-l4"]
  },
  {
    name: "filter-any-pair",
    bug: "a filtered distribution selects a session with any one of the filter's metadata pairs instead of all",
    file: "packages/agent/src/Controller.ts",
    find: "Object.entries(filter.metadata ?? {}).every(([key, value]) => record.metadata[key] === value)",
    replace: "Object.entries(filter.metadata ?? {}).some(([key, value]) => record.metadata[key] === value)",
    catches: ["distribution"],
    sessions: ["distribute-lifecycle"]
  },
  {
    name: "paused-session-takes-turns",
    bug: "the turn engine refuses turns in ended sessions only, so a paused one takes them",
    file: "packages/agent/src/TurnEngine.ts",
    find: 'record.state === "active"',
    replace: 'record.state !== "ended"',
    catches: ["steps"],
    sessions: ["distribute-lifecycle"]
  },
  // --- the plan-execute-reflect orchestrator (seed 004), caught by the recorded runs
  {
    name: "reflection-limit-off-by-one",
    bug: "the orchestrator stops reflecting only past the limit, so a run reflects once more than allowed",
    file: "packages/agent/src/Orchestrator.ts",
    find: "s.reflectionCount >= s.limits.maxReflections",
    replace: "s.reflectionCount > s.limits.maxReflections",
    catches: ["run-limits", "run-transitions"],
    sessions: ["run-reflection-limit"]
  },
  {
    name: "specialist-sees-siblings",
    bug: "a specialist is given every result of the run as its dependencies, its siblings' included",
    file: "packages/agent/src/Orchestrator.ts",
    find: "dependencies: step.dependsOn.flatMap((id) => {",
    replace: "dependencies: Object.keys(state.specialistResults).flatMap((id) => {",
    catches: ["specialist-isolation"],
    sessions: ["run-three-steps"]
  },
  {
    name: "finished-step-run-again",
    bug: "execute runs every step of the plan, so a step kept from an earlier plan is run and collected again",
    file: "packages/agent/src/Orchestrator.ts",
    find: 'if (status === "done") continue',
    replace: 'if (status === "done" && s.currentPlan === undefined) continue',
    catches: ["run-results-once"],
    sessions: ["run-adjusted"]
  },
  // --- the gate's breakers (layers swapped in through the turn engine's seams)
  {
    name: "breaker:order-swapped",
    bug: "the first two layers trade places",
    breaker: "order-swapped",
    catches: ["order"],
    sessions: ["fix-login-bug"],
    gateway: true
  },
  {
    name: "breaker:query-duplicated",
    bug: "the input is sent twice",
    breaker: "query-duplicated",
    catches: ["input-once"],
    sessions: ["fix-login-bug"]
  },
  {
    name: "breaker:tool-result-dropped",
    bug: "a tool result goes missing",
    breaker: "tool-result-dropped",
    catches: ["tool-pairs"],
    sessions: ["fix-login-bug"]
  },
  {
    name: "breaker:budget-exceeded",
    bug: "more than the model takes",
    breaker: "budget-exceeded",
    catches: ["budget"],
    sessions: ["fix-login-bug"]
  },
  {
    name: "breaker:summary-recompressed",
    bug: "compaction rewrites the previous summaries",
    breaker: "summary-recompressed",
    catches: ["keep-turns"],
    sessions: ["long-migration-compacts"]
  },
  {
    name: "breaker:fewer-turns-kept",
    bug: "compaction keeps fewer turns than it must",
    breaker: "fewer-turns-kept",
    catches: ["keep-turns"],
    sessions: ["long-migration-compacts"]
  }
]
