/**
 * What the two promptfoo providers of `pnpm eval` share: the profile a provider's config names,
 * the progress line it writes for the run's table, and the violation count of that line.
 */
import { defaultProfiles } from "@ctxo/replay/Replay"

/** The profile named by the provider's config (`profile`), or one for any other model id. */
export const profileOf = (options: { readonly config?: { readonly profile?: string } }) => {
  const name = options.config?.profile ?? "gpt-4o"
  return defaultProfiles.find((p) => p.id === name) ?? { id: name, model: name, format: "openai" as const }
}

/** For the progress line only (the assertions judge): a broken check must not fail the run. */
export const violationCount = <E>(check: (evidence: E) => ReadonlyArray<unknown>, evidence: E) => {
  try {
    return check(evidence).length
  } catch {
    return undefined
  }
}

/** Writes one progress line (`CTXO_EVAL_PROGRESS=1`) for a session or scenario run, with its time so far. */
export const progressOf =
  (fields: Record<string, unknown>, started: number) => (line: Record<string, unknown>) => {
    if (process.env.CTXO_EVAL_PROGRESS === "1")
      process.stderr.write(
        `@@ctxo-progress ${JSON.stringify({ ...fields, ms: Math.round(performance.now() - started), ...line })}\n`
      )
  }
