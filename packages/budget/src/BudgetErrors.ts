import { clipFile, clipSentence } from "@ctxo/store/DecodeError"
import { Schema } from "effect"
import { BudgetReport } from "./BudgetReport.ts"

/** A model the registry does not know, and no default model is configured. */
export class UnknownModel extends Schema.TaggedError<UnknownModel>("@ctxo/budget/UnknownModel")(
  "UnknownModel",
  {
    model: Schema.String,
    suggestions: Schema.Array(Schema.String)
  }
) {
  override get message(): string {
    const hint = this.suggestions.length > 0 ? ` Did you mean: ${this.suggestions.join(", ")}?` : ""
    return `Unknown model "${this.model}": add it to CTXO_MODELS or a models file, or set CTXO_FALLBACK_MODEL.${hint}`
  }
}

/** Model overrides (environment or file) that are not valid. Names where they came from and the field. */
export class InvalidModelConfig extends Schema.TaggedError<InvalidModelConfig>(
  "@ctxo/budget/InvalidModelConfig"
)("InvalidModelConfig", {
  origin: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return clipSentence(`Invalid model configuration in ${clipFile(this.origin)}: ${this.reason}`)
  }
}

/**
 * The required sources (system prompt, current user input) alone do not fit what the model can
 * take. Nothing was cut; the numbers and the report say by how much it is over.
 */
export class BudgetExceeded extends Schema.TaggedError<BudgetExceeded>("@ctxo/budget/BudgetExceeded")(
  "BudgetExceeded",
  {
    model: Schema.String,
    available: Schema.Number,
    required: Schema.Number,
    sources: Schema.Array(Schema.Struct({ id: Schema.String, tokens: Schema.Number })),
    report: Schema.optional(BudgetReport)
  }
) {
  override get message(): string {
    const parts = this.sources.map((s) => `${s.id} ${s.tokens}`).join(", ")
    return `Required context does not fit ${this.model}: ${this.required} tokens (${parts}) > ${this.available} available`
  }
}
