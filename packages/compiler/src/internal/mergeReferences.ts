/**
 * Stage "merge references": a user input as the model reads it. The references written inline
 * (`[file:12:30]`, `[file#Block]`, `[file#^b3]`) and those sent with it (manifest shape) are
 * resolved in the session directory and appended, each once, after the text; `@file` mentions add
 * their `<system-reminder>`. A new query and the input of a running turn go through this same
 * function, so a turn's first step shows exactly what a compile of that query shows.
 */
import type { InputReference } from "@ctxo/history/Message"
import { Effect, Either } from "effect"
import * as CompileCache from "../CompileCache.ts"
import { UnresolvedReference } from "../CompilerErrors.ts"
import { withMentionReminder } from "../Mentions.ts"
import type { ParsedReference } from "../References.ts"
import { formatReference, parseInlineReferences, parseReference, resolveReference } from "../References.ts"
import type * as Workspace from "../Workspace.ts"
import { readSidecar } from "./sidecar.ts"

const orElseFail = <A, E>(either: Either.Either<A, E>) =>
  Either.match(either, { onLeft: Effect.fail, onRight: Effect.succeed })

export interface MergeReferencesOptions {
  readonly workspace: Workspace.Service
  /** Where decoded sidecars are kept. */
  readonly cache: CompileCache.Service
  readonly sessionId: string
  /** The user's words. */
  readonly text: string
  /** References sent with them (besides those written inline). */
  readonly references: ReadonlyArray<InputReference>
  readonly warn: (message: string) => void
}

/** The input with its mention reminder and resolved references; "" stays "". */
export const mergeReferences = (
  options: MergeReferencesOptions
): Effect.Effect<string, UnresolvedReference> => Effect.gen(() => merging(options))

function* merging(options: MergeReferencesOptions) {
  const { workspace: ws, sessionId: sid, text } = options
  const refs: Array<ParsedReference> = [...parseInlineReferences(text)]
  for (const ref of options.references) {
    const parsed = yield* orElseFail(parseReference(ref))
    if (!refs.some((r) => r.raw === parsed.raw)) refs.push(parsed)
  }
  const resolved: Array<string> = []
  for (const ref of refs) {
    const content = yield* ws
      .read("session", sid, ref.path)
      .pipe(Effect.mapError((e) => new UnresolvedReference({ ref: ref.raw, kind: e.kind, reason: e.reason })))
    const sidecar =
      ref._tag === "block" && content !== undefined
        ? yield* readSidecar(
            options.cache,
            (path) => ws.read("session", sid, path),
            ref.path,
            (path) => CompileCache.fileKey(ws.root, sid, path)
          )
        : undefined
    const r = yield* orElseFail(resolveReference(ref, content, sidecar))
    if (r.warning !== undefined) options.warn(r.warning)
    resolved.push(formatReference(r))
  }
  return text === "" ? "" : [withMentionReminder(text), ...resolved].join("\n\n")
}
