/**
 * File freshness for the Read tool (seed 002 A8, C4): remembers the mtime each file had when it was
 * last read (in memory, not persisted) and, when a second read finds it changed, gives the note
 * "Note: <file> was modified externally."
 */
export interface ReadTracker {
  /** Records a read; returns the note when the file changed since the previous read. */
  readonly observe: (file: string, mtime: number | string | Date) => string | undefined
}

export const modifiedNote = (file: string): string => `Note: ${file} was modified externally.`

export const createReadTracker = (): ReadTracker => {
  const seen = new Map<string, number>()
  return {
    observe: (file, mtime) => {
      const time =
        mtime instanceof Date ? mtime.getTime() : typeof mtime === "string" ? Date.parse(mtime) : mtime
      const previous = seen.get(file)
      seen.set(file, time)
      return previous !== undefined && previous !== time ? modifiedNote(file) : undefined
    }
  }
}
