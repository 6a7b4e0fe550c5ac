// Scenario invariant "distribution": a distributed task reaches exactly the sessions its mode and filter select (see @ctxo/replay/ScenarioInvariants).
import { assertScenarioInvariant } from "./scenario-check.js"

export default (output) => assertScenarioInvariant("distribution", output)
