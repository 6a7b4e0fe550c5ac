// Scenario invariant "steps": every step succeeded or failed as the scenario expects; no turn in a paused or ended session (see @ctxo/replay/ScenarioInvariants).
import { assertScenarioInvariant } from "./scenario-check.js"

export default (output) => assertScenarioInvariant("steps", output)
