// Scenario invariant "run-results-once": every step's result collected once: one finished entry, one result and one event a step, its status done (see @ctxo/replay/ScenarioInvariants).
import { assertScenarioInvariant } from "./scenario-check.js"

export default (output) => assertScenarioInvariant("run-results-once", output)
