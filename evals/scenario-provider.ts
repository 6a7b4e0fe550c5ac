/**
 * The promptfoo provider of the scenario suite (`scenarios.yaml`): one per model profile. The
 * prompt is a scenario file (`ctxo.scenario/v1`); the provider plays it in-process through the
 * real services (`@ctxo/replay/ScenarioRun`: the turn engine, the controller and its event bus,
 * memory, aggregate, over a file store in a temporary directory) and returns what it observed
 * (JSON). It judges nothing: the assertion files do (`@ctxo/replay/ScenarioInvariants`).
 *
 * `CTXO_EVAL_BREAK=<breaker>` swaps in a deliberately broken compiler or compactor, as for the
 * recorded sessions. With `CTXO_EVAL_PROGRESS=1` each finished scenario writes one progress line to
 * stderr (`@@ctxo-progress {json}`).
 */
import { readFileSync } from "node:fs"
import { basename, resolve } from "node:path"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import type { BreakerName } from "@ctxo/replay/Breakers"
import { brokenLayer } from "@ctxo/replay/Breakers"
import { live } from "@ctxo/replay/Replay"
import { parseScenario } from "@ctxo/replay/Scenario"
import { checkScenario } from "@ctxo/replay/ScenarioInvariants"
import { existingSessions, runScenario } from "@ctxo/replay/ScenarioRun"
import { Either, Layer, ManagedRuntime } from "effect"
import { profileOf, progressOf, violationCount } from "./provider-common.ts"

const root = resolve(import.meta.dirname, "..")

export default class CtxoScenarioProvider {
  private readonly profile
  private readonly runtime
  private readonly providerId: string
  constructor(options: { readonly id?: string; readonly config?: { readonly profile?: string } }) {
    this.profile = profileOf(options)
    this.runtime = ManagedRuntime.make(Layer.mergeAll(ModelRegistry.layer(), Tokenizer.layer()))
    this.providerId = options.id ?? `ctxo-scenario:${this.profile.id}`
  }
  id() {
    return this.providerId
  }
  async callApi(prompt: string) {
    const started = performance.now()
    const file = resolve(root, prompt.trim())
    const name = basename(file).replace(/\.json$/, "")
    const progress = progressOf({ kind: "scenario", session: name, profile: this.profile.id }, started)
    const text = readFileSync(file, "utf8")
    let shape: Parameters<typeof existingSessions>[0] = {}
    try {
      shape = JSON.parse(text) as typeof shape
    } catch {
      // parseScenario says what is wrong with it.
    }
    const scenario = parseScenario(text, prompt.trim(), existingSessions(shape, root))
    if (Either.isLeft(scenario)) {
      progress({ error: scenario.left.message })
      return { error: scenario.left.message }
    }
    const broken = process.env.CTXO_EVAL_BREAK as BreakerName | undefined
    const evidence = await this.runtime
      .runPromise(
        runScenario(scenario.right, this.profile, { root, seams: broken ? brokenLayer(broken) : live })
      )
      .catch((e) => {
        progress({ error: String(e) })
        throw e
      })
    progress({
      steps: evidence.steps.length,
      compiles: evidence.budgets.filter((b) => b.what === "compile").length,
      aggregates: evidence.aggregates.length,
      violations: violationCount(checkScenario, evidence)
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
