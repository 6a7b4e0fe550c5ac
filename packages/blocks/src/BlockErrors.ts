import { clipFile, clipSentence } from "@ctxo/store/DecodeError"
import { Schema } from "effect"

/** A JSON file that does not parse. Names the file, the 1-based line and column, and what is wrong. */
export class InvalidJson extends Schema.TaggedError<InvalidJson>("@ctxo/blocks/InvalidJson")("InvalidJson", {
  file: Schema.String,
  line: Schema.Number,
  column: Schema.Number,
  reason: Schema.String
}) {
  override get message(): string {
    return `Invalid JSON in ${this.file} at line ${this.line}, column ${this.column}: ${this.reason}`
  }
}

/** A block reference that resolves to no block, with the closest ids a person might have meant. */
export class BlockNotFound extends Schema.TaggedError<BlockNotFound>("@ctxo/blocks/BlockNotFound")(
  "BlockNotFound",
  {
    file: Schema.String,
    ref: Schema.String,
    reason: Schema.String,
    suggestions: Schema.Array(Schema.String)
  }
) {
  override get message(): string {
    const hint = this.suggestions.length > 0 ? ` Did you mean: ${this.suggestions.join(", ")}?` : ""
    return `Block "${this.ref}" not found in ${this.file}: ${this.reason}.${hint}`
  }
}

/** A `.blocks.json` sidecar that is not a valid id map for this file. */
export class InvalidSidecar extends Schema.TaggedError<InvalidSidecar>("@ctxo/blocks/InvalidSidecar")(
  "InvalidSidecar",
  {
    file: Schema.String,
    reason: Schema.String
  }
) {
  override get message(): string {
    return clipSentence(`Invalid block id sidecar ${clipFile(this.file)}: ${this.reason}`)
  }
}
