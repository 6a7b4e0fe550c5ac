/**
 * The promptfoo provider: one per model profile. The prompt is a recorded session's file; the
 * provider replays it in-process through the same layers as `ctxo replay` and returns what it
 * measured at every compile (JSON). It judges nothing: the assertion files do.
 *
 * `CTXO_EVAL_BREAK=<breaker>` swaps in a deliberately broken compiler or compactor (the gate test).
 * With `CTXO_EVAL_PROGRESS=1` (run.ts sets it) each finished replay writes one progress line to
 * stderr (`@@ctxo-progress {json}`: what it compiled, and how many violations, for the display only).
 */
import { readFileSync } from "node:fs"
import { basename, resolve } from "node:path"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import type { BreakerName } from "@ctxo/replay/Breakers"
import { brokenLayer } from "@ctxo/replay/Breakers"
import { check } from "@ctxo/replay/Invariants"
import { live, replaySession } from "@ctxo/replay/Replay"
import { parseSession } from "@ctxo/replay/Session"
import { Either, Layer, ManagedRuntime } from "effect"
import { profileOf, progressOf, violationCount } from "./provider-common.ts"

const root = resolve(import.meta.dirname, "..")

export default class CtxoReplayProvider {
  private readonly profile
  private readonly runtime
  constructor(options: { readonly id?: string; readonly config?: { readonly profile?: string } }) {
    this.profile = profileOf(options)
    const broken = process.env.CTXO_EVAL_BREAK as BreakerName | undefined
    this.runtime = ManagedRuntime.make(
      Layer.mergeAll(broken ? brokenLayer(broken) : live, ModelRegistry.layer(), Tokenizer.layer())
    )
    this.providerId = options.id ?? `ctxo:${this.profile.id}`
  }
  private readonly providerId: string
  id() {
    return this.providerId
  }
  async callApi(prompt: string) {
    const started = performance.now()
    const file = resolve(root, prompt.trim())
    const name = basename(file).replace(/\.json$/, "")
    const progress = progressOf({ session: name, profile: this.profile.id }, started)
    const session = parseSession(readFileSync(file, "utf8"), prompt.trim())
    if (Either.isLeft(session)) {
      progress({ error: session.left.message })
      return { error: session.left.message }
    }
    const evidence = await this.runtime.runPromise(replaySession(session.right, this.profile)).catch((e) => {
      progress({ error: String(e) })
      throw e
    })
    progress({
      compiles: evidence.points.length,
      compactions: evidence.compactions.filter((c) => c.status !== "not-needed").length,
      refusals: evidence.failures.filter((f) => f.refusal).length,
      violations: violationCount(check, evidence)
    })
    return {
      output: JSON.stringify(evidence),
      latencyMs: Math.round(performance.now() - started),
      tokenUsage: { total: 0, prompt: 0, completion: 0 }
    }
  }
  async cleanup() {
    await this.runtime.dispose()
  }
}
