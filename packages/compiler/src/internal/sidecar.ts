/**
 * A file's block-id sidecar (`<file>.blocks.json`) read through the collect context or the
 * workspace: short ids (`^b3`) and old names of renamed headings resolve with it. No sidecar is
 * fine; a malformed one is an `UnresolvedReference` whose reason is one readable sentence.
 */
import { BlockIdSidecar, sidecarPath } from "@ctxo/blocks/BlockIds"
import { firstProblem } from "@ctxo/store/DecodeError"
import { Effect, Either, Schema } from "effect"
import type * as CompileCache from "../CompileCache.ts"
import { UnresolvedReference } from "../CompilerErrors.ts"

const decode = Schema.decodeUnknownEither(Schema.parseJson(BlockIdSidecar))

/** A sidecar's text decoded; `file` names it in the error. */
export const decodeSidecar = (
  text: string,
  file: string
): Either.Either<BlockIdSidecar, UnresolvedReference> =>
  decode(text).pipe(
    Either.mapLeft((error) => {
      const { path, problem } = firstProblem(error)
      return new UnresolvedReference({ ref: file, kind: "invalid", reason: `${path}: ${problem}` })
    })
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
