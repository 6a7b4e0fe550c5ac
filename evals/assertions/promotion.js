// Scenario invariant "promotion": L2 holds turns over the threshold (or pinned), every such turn after its turn, and reaches L4 when its session ends (see @ctxo/replay/ScenarioInvariants).
import { assertScenarioInvariant } from "./scenario-check.js"

export default (output) => assertScenarioInvariant("promotion", output)
