import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Effect } from "effect"

/**
 * Writes a file so that readers see the old content or the new, never a half-written file: the
 * text goes to a temporary file in the same directory, is flushed to disk, then renamed over the
 * target. The temporary file is removed if anything fails.
 */
export const writeFileAtomic = Effect.fn("Cli.writeFileAtomic")(function* (file: string, text: string) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const temp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${Date.now()}.tmp`)
  yield* Effect.scoped(
    Effect.gen(function* () {
      const handle = yield* fs.open(temp, { flag: "w" })
      yield* handle.writeAll(new TextEncoder().encode(text))
      yield* handle.sync
    })
  ).pipe(
    Effect.zipRight(fs.rename(temp, file)),
    Effect.onError(() => fs.remove(temp).pipe(Effect.ignore))
  )
})
