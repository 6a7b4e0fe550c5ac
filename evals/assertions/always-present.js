// Invariant "always-present" over what the provider measured (see @ctxo/replay/Invariants).
import { assertInvariant } from "./check.js"

export default (output) => assertInvariant("always-present", output)
