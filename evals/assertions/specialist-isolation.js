// Scenario invariant "specialist-isolation": each specialist's request holds its step and the results of the steps it depends on, and no other step's result (see @ctxo/replay/ScenarioInvariants).
import { assertScenarioInvariant } from "./scenario-check.js"

export default (output) => assertScenarioInvariant("specialist-isolation", output)
