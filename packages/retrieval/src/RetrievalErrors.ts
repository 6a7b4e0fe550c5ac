import { clipFile, clipSentence } from "@ctxo/store/DecodeError"
import { Schema } from "effect"

/**
 * A saved index that cannot be loaded: not JSON, another format or version, or a field of the wrong
 * shape. `snapshot` says which kind of index, `reason` what is wrong (with the JSON path when there
 * is one). The message is one sentence of at most 300 characters.
 */
export class IndexFormatError extends Schema.TaggedError<IndexFormatError>(
  "@ctxo/retrieval/IndexFormatError"
)("IndexFormatError", { snapshot: Schema.Literal("search index", "file index"), reason: Schema.String }) {
  override get message(): string {
    return clipSentence(`The saved ${this.snapshot} cannot be loaded: ${this.reason}`)
  }
}

/** An embedding call that failed or answered with something that is not one vector per text. */
export class EmbeddingError extends Schema.TaggedError<EmbeddingError>("@ctxo/retrieval/EmbeddingError")(
  "EmbeddingError",
  { model: Schema.String, reason: Schema.String }
) {
  override get message(): string {
    return clipSentence(`Embedding with ${this.model} failed: ${this.reason}`)
  }
}

/** The blocks given for a file cannot be indexed as they are (for example two blocks with one id). */
export class InvalidBlocks extends Schema.TaggedError<InvalidBlocks>("@ctxo/retrieval/InvalidBlocks")(
  "InvalidBlocks",
  { path: Schema.String, reason: Schema.String }
) {
  override get message(): string {
    return clipSentence(`The blocks of ${clipFile(this.path)} cannot be indexed: ${this.reason}`)
  }
}
