// Scenario invariant "l4-survives-restart": L4 is identical across a restart and a later compile still draws on it (see @ctxo/replay/ScenarioInvariants).
import { assertScenarioInvariant } from "./scenario-check.js"

export default (output) => assertScenarioInvariant("l4-survives-restart", output)
