/**
 * File operations that cannot be redirected out of the data root by a symlink swapped in between
 * a check and the use. A path is never checked and then opened again by name:
 *
 * - Reads open the file first, then ask where the opened descriptor really is (on Linux its
 *   `/proc/self/fd/<fd>` link; elsewhere the real path, compared by device and inode with the open
 *   file), and read only when that is inside what the caller may touch.
 * - Writes open each directory on the way (creating what is missing), check where the opened
 *   directory really is, and create, fsync and rename the temporary file relative to that open
 *   directory (`/proc/self/fd/<dirfd>/<name>`), so a directory swapped meanwhile is not followed.
 *   Without `/proc` (macOS) the directory is checked by path right before and after the write.
 *
 * Temporary files are named `.<name>.<pid>.<n>.ctxo-tmp`; start-up removes any left by a crash.
 */
import type { Stats } from "node:fs"
import { constants, statSync } from "node:fs"
import type { FileHandle } from "node:fs/promises"
import { access, lstat, mkdir, open, readlink, realpath, rename, rm, stat, unlink } from "node:fs/promises"
import { dirname, join, sep } from "node:path"
import { TEMP_SUFFIX } from "../Paths.ts"

let hasProc: Promise<boolean> | undefined
const procFds = () => {
  hasProc ??= access("/proc/self/fd").then(
    () => true,
    () => false
  )
  return hasProc
}

export const errnoOf = (e: unknown): string | undefined => (e as NodeJS.ErrnoException)?.code

export const isInside = (real: string, base: string): boolean =>
  real === base || real.startsWith(base.endsWith(sep) ? base : `${base}${sep}`)

export const stampOf = (info: Stats): string => `${info.dev}:${info.ino}:${info.mtimeMs}:${info.size}`

/** Where an open descriptor really is; undefined when it cannot be told (it moved meanwhile). */
const realOf = async (handle: FileHandle, path: string): Promise<string | undefined> => {
  if (await procFds()) {
    const real = await readlink(`/proc/self/fd/${handle.fd}`)
    return real.endsWith(" (deleted)") ? undefined : real
  }
  const [opened, real] = await Promise.all([handle.stat(), realpath(path)])
  const there = await stat(real)
  return opened.dev === there.dev && opened.ino === there.ino ? real : undefined
}

export type ReadResult =
  | { readonly _tag: "Missing" }
  | { readonly _tag: "Outside" }
  | { readonly _tag: "NotFile" }
  | {
      readonly _tag: "Read"
      readonly text: string
      readonly stamp: string
      readonly real: string
      readonly ino: number
      readonly size: number
    }

/** Opens `path`, checks where the opened file is with `allowed`, and reads it. */
export const readInside = async (path: string, allowed: (real: string) => boolean): Promise<ReadResult> => {
  let handle: FileHandle
  try {
    // Non-blocking: a FIFO planted in the data root does not hang the reader.
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK)
  } catch (e) {
    const code = errnoOf(e)
    if (code === "ENOENT" || code === "ENOTDIR") return { _tag: "Missing" }
    if (code === "ELOOP") return { _tag: "Outside" }
    if (code === "EISDIR") return { _tag: "NotFile" }
    throw e
  }
  try {
    const real = await realOf(handle, path)
    if (real === undefined || !allowed(real)) return { _tag: "Outside" }
    const info = await handle.stat()
    if (!info.isFile()) return { _tag: "NotFile" }
    const text = await handle.readFile("utf8")
    return { _tag: "Read", text, stamp: stampOf(info), real, ino: info.ino, size: info.size }
  } finally {
    await handle.close()
  }
}

/**
 * The stamp of what `path` names now (following links), or undefined when it is not a file. One
 * synchronous `stat` that throws for nothing: about 4 µs here, where the thread pool's round trip
 * of an asynchronous one took 33 µs, and 43 µs with the exception of a missing file; a cached read
 * is validated by it on every call.
 */
export const stampNow = (path: string): string | undefined => {
  try {
    const info = statSync(path, { throwIfNoEntry: false })
    return info?.isFile() === true ? stampOf(info) : undefined
  } catch {
    return undefined
  }
}

/**
 * The stamp of the directory `path` names now (device, inode, modification time: an entry made,
 * removed or renamed in it changes it), or undefined when it is not a directory.
 */
export const dirStampNow = (path: string): string | undefined => {
  try {
    const info = statSync(path, { throwIfNoEntry: false })
    return info?.isDirectory() === true ? `${info.dev}:${info.ino}:${info.mtimeMs}` : undefined
  } catch {
    return undefined
  }
}

/** Whether `path` is a directory now (following links): one synchronous `stat`, as `stampNow`. */
export const isDirectoryNow = (path: string): boolean => {
  try {
    return statSync(path, { throwIfNoEntry: false })?.isDirectory() === true
  } catch {
    return false
  }
}

export class OutsideError extends Error {
  constructor(readonly path: string) {
    super("leads out of its directory through a symlink")
  }
}

let counter = 0

/** A directory opened for the writes below it, checked to be inside `allowed`. */
interface OpenDir {
  /** The path to use for names inside it (`/proc/self/fd/<fd>` when available). */
  readonly path: string
  readonly real: string
  readonly close: () => Promise<void>
}

const openDir = async (path: string, allowed: (real: string) => boolean): Promise<OpenDir> => {
  if (await procFds()) {
    const handle = await open(path, constants.O_RDONLY | constants.O_DIRECTORY)
    const real = await readlink(`/proc/self/fd/${handle.fd}`)
    if (!allowed(real)) {
      await handle.close()
      throw new OutsideError(path)
    }
    return { path: `/proc/self/fd/${handle.fd}`, real, close: () => handle.close() }
  }
  const real = await realpath(path)
  if (!allowed(real) || !(await stat(real)).isDirectory()) throw new OutsideError(path)
  return { path: real, real, close: async () => {} }
}

/**
 * Opens the directory `base/segments...`, creating missing directories, each one checked inside
 * `allowed` once open. `base` must exist (a session's directory is never created by a write).
 */
const openDirs = async (
  base: string,
  segments: ReadonlyArray<string>,
  allowed: (real: string) => boolean,
  create: boolean
): Promise<OpenDir> => {
  let dir = await openDir(base, allowed)
  for (const segment of segments) {
    const next = join(dir.path, segment)
    if (create) {
      try {
        await mkdir(next)
      } catch (e) {
        if (errnoOf(e) !== "EEXIST") {
          await dir.close()
          throw e
        }
      }
    }
    let child: OpenDir
    try {
      child = await openDir(next, allowed)
    } finally {
      await dir.close()
    }
    dir = child
  }
  return dir
}

/**
 * Writes `text` to `base/relative` so readers see the old content or the new, never half a file,
 * and never anywhere outside `allowed`: a temporary file in the opened directory, fsync, rename.
 * A symlink at the target itself is replaced, not followed.
 */
export const writeInside = async (
  base: string,
  relative: string,
  text: string,
  allowed: (real: string) => boolean
): Promise<void> => {
  const segments = relative.split("/")
  const name = segments.pop()!
  const dir = await openDirs(base, segments, allowed, true)
  const temp = join(dir.path, `.${name}.${process.pid}.${counter++}${TEMP_SUFFIX}`)
  try {
    const handle = await open(
      temp,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      0o644
    )
    try {
      if (text.length > 0) await handle.writeFile(text, "utf8")
      await handle.sync()
    } finally {
      await handle.close()
    }
    if (!(await procFds())) {
      // No descriptor-relative paths here: check the directory again right before the rename.
      const real = await realpath(dirname(temp))
      if (real !== dir.real || !allowed(real)) throw new OutsideError(relative)
    }
    await rename(temp, join(dir.path, name))
  } catch (e) {
    await rm(temp, { force: true }).catch(() => {})
    throw e
  } finally {
    await dir.close()
  }
}

/**
 * Opens `base/name` (a file directly in `base`, created when missing) for appending, through the
 * opened and checked directory; a symlink at the name is refused (`ELOOP`), never followed.
 */
export const openForAppend = async (
  base: string,
  name: string,
  allowed: (real: string) => boolean
): Promise<FileHandle> => {
  const dir = await openDirs(base, [], allowed, false)
  try {
    return await open(
      join(dir.path, name),
      constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND | constants.O_NOFOLLOW,
      0o644
    )
  } finally {
    await dir.close()
  }
}

/** Removes the file `base/relative` (not a directory), resolved through opened directories. */
export const unlinkInside = async (
  base: string,
  relative: string,
  allowed: (real: string) => boolean
): Promise<"removed" | "missing" | "directory"> => {
  const segments = relative.split("/")
  const name = segments.pop()!
  let dir: OpenDir
  try {
    dir = await openDirs(base, segments, allowed, false)
  } catch (e) {
    if (errnoOf(e) === "ENOENT" || errnoOf(e) === "ENOTDIR") return "missing"
    throw e
  }
  try {
    const target = join(dir.path, name)
    const info = await lstat(target).catch((e) => (errnoOf(e) === "ENOENT" ? undefined : Promise.reject(e)))
    if (info === undefined) return "missing"
    if (info.isDirectory()) return "directory"
    await unlink(target)
    return "removed"
  } finally {
    await dir.close()
  }
}
