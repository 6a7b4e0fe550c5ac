// Scenario invariant "run-transitions": every transition of a run is one of the seed's state diagram, from start to done; the run's path, complexity, plans, reflections and results are what the scenario expects (see @ctxo/replay/ScenarioInvariants).
import { assertScenarioInvariant } from "./scenario-check.js"

export default (output) => assertScenarioInvariant("run-transitions", output)
