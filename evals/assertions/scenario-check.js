// Shared by the scenario suite's assertion files: runs one invariant of @ctxo/replay/ScenarioInvariants
// on a scenario run's evidence and names every violation. Loaded under tsx, like check.js.
import { checkScenario, formatScenarioViolation } from "@ctxo/replay/ScenarioInvariants"

export const assertScenarioInvariant = (invariant, output) => {
  const evidence = JSON.parse(output)
  const violations = checkScenario(evidence, invariant)
  if (violations.length === 0)
    return {
      pass: true,
      score: 1,
      reason: `${invariant}: ${evidence.steps.length} steps, ${evidence.budgets.length} budgets, ${evidence.aggregates.length} aggregates, no violation`
    }
  const shown = violations.slice(0, 5).map(formatScenarioViolation)
  return {
    pass: false,
    score: 0,
    reason: `${invariant}: ${violations.length} violation(s): ${shown.join(" || ")}${violations.length > 5 ? " || …" : ""}`
  }
}
