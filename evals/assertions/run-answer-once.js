// Scenario invariant "run-answer-once": the goal is one input of the session's history and the final answer is recorded once, as the run's turn's answer (see @ctxo/replay/ScenarioInvariants).
import { assertScenarioInvariant } from "./scenario-check.js"

export default (output) => assertScenarioInvariant("run-answer-once", output)
