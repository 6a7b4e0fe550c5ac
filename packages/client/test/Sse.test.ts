import { describe, expect, it } from "vitest"
import { createSseParser } from "../src/Sse.ts"

describe("createSseParser", () => {
  it("reads events split anywhere, with CRLF, CR, comments and data over several lines", () => {
    const text =
      ': keep-alive\r\nevent: turn\r\ndata: {"a":1}\r\n\r\nevent: text-delta\rdata: one\rdata: two\r\rid: 7\ndata: x\n\n'
    for (const size of [1, 2, 3, 5, text.length]) {
      const parser = createSseParser()
      const events = []
      for (let i = 0; i < text.length; i += size) events.push(...parser.push(text.slice(i, i + size)))
      events.push(...parser.end())
      expect([size, events]).toEqual([
        size,
        [
          { event: "turn", data: '{"a":1}' },
          { event: "text-delta", data: "one\ntwo" },
          { event: "message", data: "x", id: "7" }
        ]
      ])
    }
  })

  it("gives the last event when the stream ends without a blank line, and nothing for a comment", () => {
    const parser = createSseParser()
    expect(parser.push("event: done\ndata: {}")).toEqual([])
    expect(parser.end()).toEqual([{ event: "done", data: "{}" }])
    expect(createSseParser().push(": only a comment\n\n")).toEqual([])
  })
})
