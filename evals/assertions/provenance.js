// Scenario invariant "provenance": every block of an aggregate names its session and its level or source (see @ctxo/replay/ScenarioInvariants).
import { assertScenarioInvariant } from "./scenario-check.js"

export default (output) => assertScenarioInvariant("provenance", output)
