/**
 * The gateway's hot path on plain node:http. `POST /v1/chat/completions`, spelled as clients spell
 * it, is served here before the Effect HTTP app sees it: no router, no fiber per request, no
 * response stream of Effect's, while the request keeps every rule of the middleware (`Server`),
 * through the same functions: the 413 for a declared length over the limit, who may call it (a
 * tenant's key when keys are configured), a JSON body within the size and nesting limits, the
 * tenant's requests in flight, `x-request-id`, errors in OpenAI's shape and bounded, one access log
 * line and the request metrics when the answer ended. The answer itself is `ChatCompletions`',
 * the same code the HttpApi route runs for every other spelling the router takes
 * (`/v1/chat/completions/`, `//v1/chat/completions`, `/V1/...`).
 *
 * The server is made with `laneServer`: its `request` events go to the lane first, the rest to the
 * Effect app's listener as before.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { Context, Effect, Layer, Option, Runtime } from "effect"
import { authorize, busyRefusal, newRequestId, refusalBody } from "./Admission.ts"
import { type Answer, ChatCompletions } from "./ChatCompletions.ts"
import { boundErrorBody } from "./ErrorMapping.ts"
import { GatewayConfig } from "./GatewayConfig.ts"
import { infoLogger } from "./LogLines.ts"
import * as Metrics from "./Metrics.ts"
import * as RequestBody from "./RequestBody.ts"
import * as Routes from "./Routes.ts"
import { Tenancy } from "./Tenancy.ts"

/** Where the server looks for its lane: empty until the app's layer fills it. */
export interface Slot {
  take: (request: IncomingMessage, response: ServerResponse) => boolean
}

export class LaneSlot extends Context.Tag("@ctxo/gateway/LaneSlot")<LaneSlot, Slot>() {}

export const emptySlot = (): Slot => ({ take: () => false })

/** A node:http server whose requests its slot's lane may take first; the others go on as events. */
export const laneServer = (slot: Slot): Server => {
  const server = createServer()
  const emit = server.emit
  server.emit = function (this: Server, event: string | symbol, ...args: Array<unknown>) {
    if (event === "request" && slot.take(args[0] as IncomingMessage, args[1] as ServerResponse)) return true
    return emit.apply(this, [event, ...args] as Parameters<typeof emit>)
  } as typeof server.emit
  return server
}

const PATH = "/v1/chat/completions"
const ROUTE = Routes.routeOf("POST", PATH)
const TEMPLATE = Metrics.routeOf("POST", PATH).route

/** The lane over the app's services; it fills the slot when one was given (`LaneSlot`). */
export const layer: Layer.Layer<never, never, ChatCompletions | Tenancy | GatewayConfig> =
  Layer.effectDiscard(
    Effect.gen(function* () {
      const slot = yield* Effect.serviceOption(LaneSlot)
      if (Option.isNone(slot)) return
      const completions = yield* ChatCompletions
      const access = yield* Tenancy
      const config = yield* GatewayConfig
      const runtime = yield* Effect.runtime<never>()
      const roots = [config.dataDir]
      const limit = config.maxBodyBytes
      const logInfo = infoLogger(runtime)

      const serve = async (request: IncomingMessage, response: ServerResponse) => {
        const started = Date.now()
        const requestId = (request.headers["x-request-id"] as string | undefined) ?? newRequestId()
        const stats = Metrics.newStats(requestId)
        stats.session = Metrics.sessionOf(
          {},
          request.headers as Record<string, string | undefined>,
          undefined
        )
        let tenant: string | undefined
        // The client gone before the answer ended: the upstream call or the turn is stopped.
        const stops: Array<() => void> = []
        response.once("close", () => {
          if (!response.writableFinished) for (const stop of stops) stop()
        })
        let logged = false
        const log = (status: number) => {
          if (logged) return
          logged = true
          const line = Metrics.requestFinishedNow({
            method: "POST",
            url: request.url ?? PATH,
            route: TEMPLATE,
            status,
            requestId,
            tenant,
            durationMs: Date.now() - started,
            stats
          })
          logInfo(line.message, line.annotations)
        }
        const json = (status: number, headers: Readonly<Record<string, string>>, text: string) => {
          response.writeHead(status, {
            ...headers,
            "x-request-id": requestId,
            "content-length": Buffer.byteLength(text)
          })
          response.end(text)
          log(status)
        }
        const refuse = (refusal: RequestBody.Refusal) => {
          const body = boundErrorBody(refusalBody(ROUTE, refusal), roots)
          stats.error ??= Metrics.reasonOf(body) ?? `HTTP ${refusal.status}`
          json(
            refusal.status,
            { ...refusal.headers, "content-type": "application/json" },
            JSON.stringify(body)
          )
        }

        const declared = RequestBody.declaredRefusal(request.headers, limit)
        if (declared !== undefined) return refuse(declared)
        const caller = authorize(request.headers, ROUTE, access)
        if ("refused" in caller) return refuse(caller.refused)
        tenant = caller.tenant
        const read = await RequestBody.readJsonBody(request, limit)
        if ("status" in read) return refuse(read)
        const busy = access.admit(caller.tenant)
        if (busy !== undefined) return refuse(busyRefusal(caller.tenant, busy, access))
        try {
          const answer = await completions.answer({
            headers: request.headers,
            text: read.text,
            tenant: caller.tenant,
            stats,
            onGone: (stop) => void stops.push(stop)
          })
          if (answer._tag === "Json") return json(answer.status, answer.headers, answer.text)
          await stream(answer, response, requestId, stats)
          log(200)
        } finally {
          access.release(caller.tenant)
        }
      }

      slot.value.take = (request, response) => {
        if (request.method !== "POST" || request.url !== PATH) return false
        serve(request, response).catch((error: unknown) => {
          Runtime.runFork(runtime)(Effect.logError("chat completion failed", error))
          if (!response.headersSent)
            response.writeHead(500, { "content-type": "application/json" }).end(
              JSON.stringify({
                error: {
                  message: "The gateway failed on this request",
                  type: "server_error",
                  code: null,
                  param: null
                }
              })
            )
          else response.destroy()
        })
        return true
      }
    })
  )

/**
 * Writes a streamed answer as it comes, waiting for the socket when it is full; a client that goes
 * away cancels the rest (the upstream call, or the session's turn).
 */
const stream = async (
  answer: Extract<Answer, { _tag: "Stream" }>,
  response: ServerResponse,
  requestId: string,
  stats: Metrics.RequestStats
) => {
  stats.stream = true
  let gone = false
  let resume: (() => void) | undefined
  const onClose = () => {
    if (response.writableFinished) return
    gone = true
    answer.cancel()
    resume?.()
  }
  response.on("close", onClose)
  response.on("drain", () => resume?.())
  const write = async (frame: string) => {
    if (!response.write(frame) && !gone) await new Promise<void>((r) => (resume = r))
    resume = undefined
  }
  response.writeHead(200, { ...answer.headers, "x-request-id": requestId })
  await write(answer.first)
  for (;;) {
    if (gone) return
    const frame = await answer.next()
    if (frame === undefined || gone) break
    await write(frame)
  }
  if (!gone) response.end()
}
