/**
 * A file's block-id sidecar (`<file>.blocks.json`) read through the collect context or the
 * workspace: short ids (`^b3`) and old names of renamed headings resolve with it. No sidecar is
 * fine; a malformed one is an `UnresolvedReference` whose reason is one readable sentence.
 */
import type { BlockIdSidecar } from "@ctxo/blocks/BlockIds"
import * as BlockIds from "@ctxo/blocks/BlockIds"
import { Effect, Either } from "effect"
import type * as CompileCache from "../CompileCache.ts"
import { UnresolvedReference } from "../CompilerErrors.ts"

const { sidecarPath } = BlockIds

/** A sidecar's text decoded (the blocks package's rule); `file` names it in the error. */
export const decodeSidecar = (
  text: string,
  file: string
): Either.Either<BlockIdSidecar, UnresolvedReference> =>
  BlockIds.decodeSidecar(text, file).pipe(
    Either.mapLeft((error) => new UnresolvedReference({ ref: file, kind: "invalid", reason: error.reason }))
  )

/**
 * The sidecar of `file`, or undefined when there is none. `key` names the file for the cache
 * (`CompileCache.fileKey` of `file`): the same text gives the same sidecar object, so caches
 * keyed by it keep hitting.
 */
export const readSidecar = (
  cache: CompileCache.Service,
  read: (path: string) => Effect.Effect<string | undefined, UnresolvedReference>,
  file: string,
  key: (path: string) => string
): Effect.Effect<BlockIdSidecar | undefined, UnresolvedReference> => {
  const path = sidecarPath(file)
  return Effect.flatMap(read(path), (text) =>
    text === undefined
      ? Effect.succeed(undefined)
      : Either.match(cache.sidecar(key(path), text, path), { onLeft: Effect.fail, onRight: Effect.succeed })
  )
}
