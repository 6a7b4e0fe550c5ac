// Scenario invariant "no-foreign-blocks": no block of an aggregate comes from an ended session, a session not listed or another tenant (see @ctxo/replay/ScenarioInvariants).
import { assertScenarioInvariant } from "./scenario-check.js"

export default (output) => assertScenarioInvariant("no-foreign-blocks", output)
