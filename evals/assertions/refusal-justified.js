// Invariant "refusal-justified" over what the provider measured (see @ctxo/replay/Invariants).
import { assertInvariant } from "./check.js"

export default (output) => assertInvariant("refusal-justified", output)
