import { clipFile, clipSentence } from "@ctxo/store/DecodeError"
import type { PathRefused } from "@ctxo/store/StoreErrors"
import { Schema } from "effect"

/** A `context-config.json` that does not match the manifest schema. Names the file and the field. */
export class InvalidManifest extends Schema.TaggedError<InvalidManifest>("@ctxo/compiler/InvalidManifest")(
  "InvalidManifest",
  { file: Schema.String, field: Schema.String, reason: Schema.String }
) {
  override get message(): string {
    return clipSentence(`Invalid manifest ${clipFile(this.file)}: ${this.field}: ${this.reason}`)
  }
}

/**
 * A reference that cannot be resolved: the file is missing, the line range is outside the file,
 * the block does not exist, or the path leaves the sandbox. Names the reference as written.
 */
export class UnresolvedReference extends Schema.TaggedError<UnresolvedReference>(
  "@ctxo/compiler/UnresolvedReference"
)("UnresolvedReference", {
  ref: Schema.String,
  kind: Schema.Literal("missing-file", "out-of-range", "missing-block", "outside-sandbox", "invalid"),
  reason: Schema.String
}) {
  override get message(): string {
    return `Reference ${this.ref}: ${this.reason}`
  }
}

/** A path the store's rule refuses (`PathRefused`), as the reference `ref` that named it. */
export const outsideSandbox = (ref: string, refused: PathRefused): UnresolvedReference =>
  new UnresolvedReference({ ref, kind: "outside-sandbox", reason: refused.reason })

/** A collector returned a key that does not end in `__context`, or a key the composer cannot place. */
export class InvalidContextKey extends Schema.TaggedError<InvalidContextKey>(
  "@ctxo/compiler/InvalidContextKey"
)("InvalidContextKey", { key: Schema.String, reason: Schema.String }) {
  override get message(): string {
    return `Context "${this.key}": ${this.reason}`
  }
}

/** The current input was handed to the composer twice (in the history and as the query). */
export class DuplicateInput extends Schema.TaggedError<DuplicateInput>("@ctxo/compiler/DuplicateInput")(
  "DuplicateInput",
  { messageId: Schema.String }
) {
  override get message(): string {
    return `The current input is already in the history (message ${this.messageId}): it must enter by one path only`
  }
}
