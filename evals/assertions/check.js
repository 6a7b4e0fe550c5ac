// Shared by the assertion files: runs one invariant's rule and names every violation.
// Loaded under tsx (run.ts starts promptfoo with it), so the TypeScript rules import directly.
import { check, formatViolation } from "@ctxo/replay/Invariants"

export const assertInvariant = (invariant, output) => {
  const evidence = JSON.parse(output)
  const violations = check(evidence, invariant)
  if (violations.length === 0)
    return { pass: true, score: 1, reason: `${invariant}: ${evidence.points.length} compiles, no violation` }
  const shown = violations.slice(0, 5).map(formatViolation)
  return {
    pass: false,
    score: 0,
    reason: `${invariant}: ${violations.length} violation(s): ${shown.join(" || ")}${violations.length > 5 ? " || …" : ""}`
  }
}
