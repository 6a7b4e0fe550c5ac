import type { IncomingMessage, ServerResponse } from "node:http"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect, Ref } from "effect"
import { hashedVector } from "../src/Embedder.ts"
import type { FileBlock, Persistence } from "../src/FileIndex.ts"

/** An in-memory `Persistence` that counts loads and saves. */
export const memoryPersistence = (initial?: string) =>
  Effect.gen(function* () {
    const stored = yield* Ref.make<string | undefined>(initial)
    const saves = yield* Ref.make(0)
    const persistence: Persistence = {
      load: Ref.get(stored),
      save: (text) => Ref.set(stored, text).pipe(Effect.zipRight(Ref.update(saves, (n) => n + 1)))
    }
    return { persistence, stored, saves }
  })

/** A `blocksOf` over a fixed map of files, counting the paths it is asked for. */
export const blockSource = (files: Map<string, ReadonlyArray<FileBlock>>) => {
  const asked: Array<string> = []
  const blocksOf = (path: string) =>
    Effect.sync(() => {
      asked.push(path)
      const blocks = files.get(path)
      if (blocks === undefined) throw new Error(`no file ${path}`)
      return blocks
    })
  return { blocksOf, asked }
}

export interface FakeEmbeddingServer {
  readonly baseURL: string
  /** Bodies of the requests received, parsed. */
  readonly requests: Array<{ model: string; input: ReadonlyArray<string>; encoding_format?: string }>
  readonly authorizations: Array<string | undefined>
  /** Replaces the handler's behaviour for the next requests. */
  mode: "ok" | "error" | "short" | "shuffled"
  readonly close: () => Promise<void>
}

/**
 * An OpenAI-compatible `POST /v1/embeddings` on 127.0.0.1 with deterministic vectors (the hashed
 * bag of words of `Embedder.hashedVector`, 64 dimensions). Modes: `error` answers 500, `short`
 * answers one vector too few, `shuffled` returns the items in reverse order (with their `index`).
 */
export const startEmbeddingServer = async (): Promise<FakeEmbeddingServer> => {
  const state: FakeEmbeddingServer = {
    baseURL: "",
    requests: [],
    authorizations: [],
    mode: "ok",
    close: async () => {}
  }
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Array<Buffer> = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    if (req.method !== "POST" || req.url !== "/v1/embeddings") {
      res.writeHead(404).end()
      return
    }
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
    state.requests.push(body)
    state.authorizations.push(req.headers.authorization)
    if (state.mode === "error") {
      res.writeHead(500, { "content-type": "application/json" })
      res.end(JSON.stringify({ error: { message: "the model is overloaded", type: "server_error" } }))
      return
    }
    const inputs: Array<string> = typeof body.input === "string" ? [body.input] : body.input
    let data = inputs.map((text, index) => ({
      object: "embedding",
      index,
      embedding: hashedVector(text, 64)
    }))
    if (state.mode === "short") data = data.slice(1)
    if (state.mode === "shuffled") data = [...data].reverse()
    res.writeHead(200, { "content-type": "application/json" })
    res.end(
      JSON.stringify({
        object: "list",
        data,
        model: body.model,
        usage: { prompt_tokens: 0, total_tokens: 0 }
      })
    )
  }
  const server = createServer((req, res) => {
    handle(req, res).catch(() => res.writeHead(500).end())
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  return Object.assign(state, {
    baseURL: `http://127.0.0.1:${port}/v1`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  })
}
