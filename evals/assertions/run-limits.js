// Scenario invariant "run-limits": reflections within the run's limit (and each one asked once), specialist steps within the step limit, each specialist's request within the specialist budget (see @ctxo/replay/ScenarioInvariants).
import { assertScenarioInvariant } from "./scenario-check.js"

export default (output) => assertScenarioInvariant("run-limits", output)
