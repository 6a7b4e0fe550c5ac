/**
 * Server-Sent Events as the browser's EventSource reads them, for a POST (which EventSource cannot
 * send): text in any pieces in, whole events out. Lines end in LF, CRLF or CR; `data:` lines join
 * with LF; a line starting with `:` is a comment; an event ends at a blank line (and at the end of
 * the stream, for one the server did not close with a blank line).
 */

export interface SseEvent {
  /** `event:` (default `message`). */
  readonly event: string
  readonly data: string
  readonly id?: string
}

export interface SseParser {
  /** The events completed by this piece of text. */
  readonly push: (text: string) => ReadonlyArray<SseEvent>
  /** The event left open when the stream ended, if it has data. */
  readonly end: () => ReadonlyArray<SseEvent>
}

export const createSseParser = (): SseParser => {
  let buffer = ""
  let event = ""
  let data: Array<string> = []
  let id: string | undefined
  // A CR at the end of a piece may be the first half of a CRLF.
  let pendingCR = false

  const dispatch = (out: Array<SseEvent>) => {
    if (data.length > 0)
      out.push({
        event: event === "" ? "message" : event,
        data: data.join("\n"),
        ...(id === undefined ? {} : { id })
      })
    event = ""
    data = []
  }

  const line = (text: string, out: Array<SseEvent>) => {
    if (text === "") return dispatch(out)
    if (text.startsWith(":")) return
    const colon = text.indexOf(":")
    const field = colon === -1 ? text : text.slice(0, colon)
    let value = colon === -1 ? "" : text.slice(colon + 1)
    if (value.startsWith(" ")) value = value.slice(1)
    if (field === "event") event = value
    else if (field === "data") data.push(value)
    else if (field === "id" && !value.includes("\u0000")) id = value
  }

  return {
    push: (text) => {
      const out: Array<SseEvent> = []
      let input = text
      if (pendingCR && input.startsWith("\n")) input = input.slice(1)
      pendingCR = false
      buffer += input
      let start = 0
      for (let i = 0; i < buffer.length; i++) {
        const c = buffer[i]
        if (c !== "\n" && c !== "\r") continue
        line(buffer.slice(start, i), out)
        if (c === "\r") {
          if (i + 1 === buffer.length) pendingCR = true
          else if (buffer[i + 1] === "\n") i++
        }
        start = i + 1
      }
      buffer = buffer.slice(start)
      return out
    },
    end: () => {
      const out: Array<SseEvent> = []
      if (buffer !== "") line(buffer, out)
      buffer = ""
      dispatch(out)
      return out
    }
  }
}
