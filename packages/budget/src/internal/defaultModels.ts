/**
 * Default model facts. Every number names where it came from; the registry reports that source
 * with the number, so a user can check it and override it (CTXO_MODELS or a models file).
 *
 * Estimated tokenizers: models whose tokenizer is not available locally are counted with
 * cl100k_base times a per-family factor chosen above the published or commonly measured ratio
 * (safe side), then corrected from the usage the provider reports (`Tokenizer.observeUsage`).
 */
import type { ModelInfo } from "../ModelRegistry.ts"

const OPENAI = (name: string) => `https://platform.openai.com/docs/models/${name}`
const ANTHROPIC = "https://docs.anthropic.com/en/docs/about-claude/models/overview"
const GEMINI = "https://ai.google.dev/gemini-api/docs/models"
const LLAMA31 = "https://github.com/meta-llama/llama-models/blob/main/models/llama3_1/MODEL_CARD.md"
const LLAMA33 = "https://github.com/meta-llama/llama-models/blob/main/models/llama3_3/MODEL_CARD.md"
const LLAMA4 = "https://github.com/meta-llama/llama-models/blob/main/models/llama4/MODEL_CARD.md"
const MISTRAL = "https://docs.mistral.ai/getting-started/models/models_overview/"
const QWEN = (repo: string) => `https://huggingface.co/Qwen/${repo}`
const DEEPSEEK = "https://api-docs.deepseek.com/quick_start/pricing"
const TIKTOKEN_MODEL_MAP = "https://github.com/openai/tiktoken/blob/main/tiktoken/model.py"

/** Initial estimate factors over cl100k_base (see module comment); corrected by observed usage. */
export const ESTIMATE_FACTORS = {
  anthropic: 1.3,
  google: 1.1,
  meta: 1.1,
  mistral: 1.25,
  qwen: 1.1,
  deepseek: 1.15
} as const

interface Entry {
  readonly window: number
  readonly maxInput?: number
  readonly maxOutput: number
  readonly aliases?: ReadonlyArray<string>
  readonly source: string
  readonly outputSource?: string
}

const openai = (name: string, encoding: "o200k_base" | "cl100k_base", e: Entry): ModelInfo => ({
  id: `openai/${name}`,
  provider: "openai",
  name,
  aliases: e.aliases ?? [],
  contextWindow: e.window,
  maxInput: e.maxInput ?? e.window,
  maxOutput: e.maxOutput,
  tokenizer: { kind: "exact", encoding },
  chatFormat: "openai",
  sources: {
    contextWindow: e.source,
    maxInput: e.source,
    maxOutput: e.outputSource ?? e.source,
    tokenizer: TIKTOKEN_MODEL_MAP
  }
})

const estimated = (
  provider: keyof typeof ESTIMATE_FACTORS,
  name: string,
  chatFormat: ModelInfo["chatFormat"],
  e: Entry & { readonly tokenizerSource: string }
): ModelInfo => ({
  id: `${provider}/${name}`,
  provider,
  name,
  aliases: e.aliases ?? [],
  contextWindow: e.window,
  maxInput: e.maxInput ?? e.window,
  maxOutput: e.maxOutput,
  tokenizer: { kind: "estimate", family: provider, factor: ESTIMATE_FACTORS[provider] },
  chatFormat,
  sources: {
    contextWindow: e.source,
    maxInput: e.source,
    maxOutput: e.outputSource ?? e.source,
    tokenizer: e.tokenizerSource
  }
})

const anthropic = (name: string, maxOutput: number, aliases: ReadonlyArray<string> = []) =>
  estimated("anthropic", name, "anthropic", {
    window: 200_000,
    maxOutput,
    aliases,
    source: ANTHROPIC,
    tokenizerSource: "no public tokenizer; estimate from cl100k_base (see ESTIMATE_FACTORS)"
  })

// Gemini limits input and output separately; the window here is their sum.
const gemini = (name: string, maxOutput: number) =>
  estimated("google", name, "generic", {
    window: 1_048_576 + maxOutput,
    maxInput: 1_048_576,
    maxOutput,
    source: GEMINI,
    tokenizerSource: "SentencePiece (not shipped); estimate from cl100k_base"
  })

// Llama's output shares the window; the server decides the cap. The reserve comes from the ratio.
const llama = (name: string, window: number, source: string) =>
  estimated("meta", name, "llama3", {
    window,
    maxOutput: window,
    source,
    outputSource: `${source} (output shares the context window)`,
    tokenizerSource: "tiktoken-based 128K vocabulary (not shipped); estimate from cl100k_base"
  })

const mistral = (name: string, window: number) =>
  estimated("mistral", name, "generic", {
    window,
    maxOutput: window,
    source: MISTRAL,
    outputSource: `${MISTRAL} (output shares the context window)`,
    tokenizerSource: "Tekken (not shipped); estimate from cl100k_base"
  })

export const defaultModels: ReadonlyArray<ModelInfo> = [
  // OpenAI: GPT-5 family caps input below the window (400k total, 272k input, 128k output).
  openai("gpt-5", "o200k_base", {
    window: 400_000,
    maxInput: 272_000,
    maxOutput: 128_000,
    source: OPENAI("gpt-5")
  }),
  openai("gpt-5-mini", "o200k_base", {
    window: 400_000,
    maxInput: 272_000,
    maxOutput: 128_000,
    source: OPENAI("gpt-5-mini")
  }),
  openai("gpt-5-nano", "o200k_base", {
    window: 400_000,
    maxInput: 272_000,
    maxOutput: 128_000,
    source: OPENAI("gpt-5-nano")
  }),
  openai("gpt-4.1", "o200k_base", { window: 1_047_576, maxOutput: 32_768, source: OPENAI("gpt-4.1") }),
  openai("gpt-4.1-mini", "o200k_base", {
    window: 1_047_576,
    maxOutput: 32_768,
    source: OPENAI("gpt-4.1-mini")
  }),
  openai("gpt-4.1-nano", "o200k_base", {
    window: 1_047_576,
    maxOutput: 32_768,
    source: OPENAI("gpt-4.1-nano")
  }),
  openai("gpt-4o", "o200k_base", { window: 128_000, maxOutput: 16_384, source: OPENAI("gpt-4o") }),
  openai("gpt-4o-mini", "o200k_base", { window: 128_000, maxOutput: 16_384, source: OPENAI("gpt-4o-mini") }),
  openai("o1", "o200k_base", { window: 200_000, maxOutput: 100_000, source: OPENAI("o1") }),
  openai("o3", "o200k_base", { window: 200_000, maxOutput: 100_000, source: OPENAI("o3") }),
  openai("o3-mini", "o200k_base", { window: 200_000, maxOutput: 100_000, source: OPENAI("o3-mini") }),
  openai("o4-mini", "o200k_base", { window: 200_000, maxOutput: 100_000, source: OPENAI("o4-mini") }),
  openai("gpt-4-turbo", "cl100k_base", { window: 128_000, maxOutput: 4_096, source: OPENAI("gpt-4-turbo") }),
  openai("gpt-4", "cl100k_base", { window: 8_192, maxOutput: 8_192, source: OPENAI("gpt-4") }),
  openai("gpt-3.5-turbo", "cl100k_base", {
    window: 16_385,
    maxOutput: 4_096,
    source: OPENAI("gpt-3.5-turbo")
  }),

  // Anthropic: 200k windows; output caps differ per model.
  anthropic("claude-opus-4-1", 32_000, ["claude-opus-4.1"]),
  anthropic("claude-opus-4", 32_000, ["claude-opus-4-0"]),
  anthropic("claude-sonnet-4-5", 64_000, ["claude-sonnet-4.5"]),
  anthropic("claude-sonnet-4", 64_000, ["claude-sonnet-4-0"]),
  anthropic("claude-haiku-4-5", 64_000, ["claude-haiku-4.5"]),
  anthropic("claude-3-7-sonnet", 64_000),
  anthropic("claude-3-5-haiku", 8_192),

  // Google
  gemini("gemini-2.5-pro", 65_536),
  gemini("gemini-2.5-flash", 65_536),
  gemini("gemini-2.5-flash-lite", 65_536),
  gemini("gemini-2.0-flash", 8_192),

  // Meta
  llama("llama-3.1-8b-instruct", 131_072, LLAMA31),
  llama("llama-3.1-70b-instruct", 131_072, LLAMA31),
  llama("llama-3.1-405b-instruct", 131_072, LLAMA31),
  llama("llama-3.3-70b-instruct", 131_072, LLAMA33),
  llama("llama-4-maverick-17b-128e-instruct", 1_000_000, LLAMA4),
  llama("llama-4-scout-17b-16e-instruct", 10_000_000, LLAMA4),

  // Mistral
  mistral("mistral-large-latest", 131_072),
  mistral("mistral-medium-latest", 131_072),
  mistral("mistral-small-latest", 131_072),
  mistral("codestral-latest", 262_144),
  mistral("ministral-8b-latest", 131_072),

  // Qwen (open weights; windows from the model cards, native length without YaRN scaling)
  estimated("qwen", "qwen2.5-72b-instruct", "generic", {
    window: 131_072,
    maxOutput: 8_192,
    source: QWEN("Qwen2.5-72B-Instruct"),
    tokenizerSource: "Qwen BPE, 151k vocabulary (not shipped); estimate from cl100k_base"
  }),
  estimated("qwen", "qwen3-235b-a22b", "generic", {
    window: 32_768,
    maxOutput: 32_768,
    source: `${QWEN("Qwen3-235B-A22B")} (32,768 native; 131,072 only with YaRN)`,
    tokenizerSource: "Qwen BPE, 151k vocabulary (not shipped); estimate from cl100k_base"
  }),
  estimated("qwen", "qwen3-coder-480b-a35b-instruct", "generic", {
    window: 262_144,
    maxOutput: 65_536,
    source: QWEN("Qwen3-Coder-480B-A35B-Instruct"),
    tokenizerSource: "Qwen BPE, 151k vocabulary (not shipped); estimate from cl100k_base"
  }),

  // DeepSeek API: "128K" context; output caps 8K (chat) and 64K (reasoner).
  estimated("deepseek", "deepseek-chat", "generic", {
    window: 128_000,
    maxOutput: 8_192,
    source: DEEPSEEK,
    tokenizerSource: "DeepSeek BPE, 128k vocabulary (not shipped); estimate from cl100k_base"
  }),
  estimated("deepseek", "deepseek-reasoner", "generic", {
    window: 128_000,
    maxOutput: 65_536,
    source: DEEPSEEK,
    tokenizerSource: "DeepSeek BPE, 128k vocabulary (not shipped); estimate from cl100k_base"
  })
]
