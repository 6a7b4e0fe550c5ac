/**
 * Writes a file so that readers see the old content or the new, never a half-written file: the
 * text goes to a temporary file in the same directory (created if needed), is flushed to disk
 * (fsync), then renamed over the target. The temporary file is removed if anything fails.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Effect } from "effect"

let counter = 0

export const writeFileAtomic = Effect.fn("Store.writeFileAtomic")(function* (file: string, text: string) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const dir = path.dirname(file)
  yield* fs.makeDirectory(dir, { recursive: true })
  const temp = path.join(dir, `.${path.basename(file)}.${process.pid}.${Date.now()}.${counter++}.tmp`)
  yield* Effect.scoped(
    Effect.gen(function* () {
      const handle = yield* fs.open(temp, { flag: "w" })
      if (text.length > 0) yield* handle.writeAll(new TextEncoder().encode(text))
      yield* handle.sync
    })
  ).pipe(
    Effect.zipRight(fs.rename(temp, file)),
    Effect.onError(() => fs.remove(temp).pipe(Effect.ignore))
  )
})
