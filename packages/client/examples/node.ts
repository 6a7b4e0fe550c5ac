/**
 * The client from Node, without Effect: list sessions, preview a session's next request, chat with
 * a reference and watch it stream. Run it against `pnpm start`:
 *
 *   CTXO_URL=http://127.0.0.1:8787 pnpm --filter @ctxo/client exec tsx examples/node.ts
 *
 * (`CTXO_API_KEY` when the gateway has keys configured.) `pnpm --filter @ctxo/client test` runs it.
 */
import { chat, newIdempotencyKey } from "@ctxo/client/Chat"
import { connect, describeError } from "@ctxo/client/Client"
import { readPreview } from "@ctxo/client/Preview"
import { Either } from "effect"

const gateway = connect({
  baseUrl: process.env.CTXO_URL ?? "http://127.0.0.1:8787",
  apiKey: process.env.CTXO_API_KEY
})
try {
  const sessions = await gateway.api.sessions.list()
  console.log(`sessions: ${sessions.map((s) => `${s.id} (${s.state})`).join(", ")}`)

  const preview = await gateway.api.context.preview({
    path: { id: "notebook-physics" },
    urlParams: { model: "gpt-4o", format: "anthropic" }
  })
  const view = readPreview(preview)
  if (Either.isRight(view)) {
    const { report, prefix } = view.right
    console.log(
      `preview: ${report.total} of ${report.available} tokens, prefix ${prefix.hash} (${prefix.tokens} tokens)`
    )
  }

  const turn = await chat(
    gateway,
    "notebook-physics",
    { message: "Explain [guidance.md:4:5] in one line", idempotencyKey: newIdempotencyKey() },
    { onEvent: (event) => event.type === "text-delta" && process.stdout.write(".") }
  )
  console.log(`\nturn ${turn.turn}: ${turn.deltas} deltas, parts as the gateway's: ${turn.partsMatchServer}`)
  console.log(turn.error === undefined ? turn.done?.text : `error ${turn.error.tag}: ${turn.error.message}`)
} catch (error) {
  console.error(describeError(error))
  process.exitCode = 1
} finally {
  await gateway.dispose()
}
