/**
 * The promptfoo provider: one per model profile. The prompt is a recorded session's file; the
 * provider replays it in-process through the same layers as `ctxo replay` and returns what it
 * measured at every compile (JSON). It judges nothing: the assertion files do.
 *
 * `CTXO_EVAL_BREAK=<breaker>` swaps in a deliberately broken compiler or compactor (the gate test).
 */
import { readFileSync } from "node:fs"
import { resolve } from "node:path"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import type { BreakerName } from "@ctxo/replay/Breakers"
import { brokenLayer } from "@ctxo/replay/Breakers"
import { defaultProfiles, live, replaySession } from "@ctxo/replay/Replay"
import { parseSession } from "@ctxo/replay/Session"
import { Either, Layer, ManagedRuntime } from "effect"

const root = resolve(import.meta.dirname, "..")

export default class CtxoReplayProvider {
  private readonly profile
  private readonly runtime
  constructor(options: { readonly id?: string; readonly config?: { readonly profile?: string } }) {
    const name = options.config?.profile ?? "gpt-4o"
    this.profile = defaultProfiles.find((p) => p.id === name) ?? {
      id: name,
      model: name,
      format: "openai" as const
    }
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
    const file = resolve(root, prompt.trim())
    const session = parseSession(readFileSync(file, "utf8"), prompt.trim())
    if (Either.isLeft(session)) return { error: session.left.message }
    const started = performance.now()
    const evidence = await this.runtime.runPromise(replaySession(session.right, this.profile))
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
