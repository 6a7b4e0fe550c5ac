// Scenario invariant "shares-respected": every compile and aggregate keeps each source within its grant, its cap and what is available (see @ctxo/replay/ScenarioInvariants).
import { assertScenarioInvariant } from "./scenario-check.js"

export default (output) => assertScenarioInvariant("shares-respected", output)
