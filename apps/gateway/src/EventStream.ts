/**
 * What the gateway's Server-Sent Events endpoints share (the chat's turn, a plan-execute-reflect
 * run): the JSON body decoded into 400s that name the field, and a stream answered only once its
 * first event is known, so a session that takes no turns (paused, ended) is a 409 with a status
 * rather than a stream that breaks; a failure once started is the stream's last event.
 */
import { BadRequest } from "@ctxo/api/ApiErrors"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type { Schema } from "effect"
import { Effect, Either, Exit, Option, Scope, Stream } from "effect"
import { type DomainError, fromParseError, toApiError } from "./ErrorMapping.ts"

/** The request's JSON body decoded with `schema`: invalid JSON or a field is a 400 naming it. */
export const decodeBody = <A, I>(schema: Schema.Schema<A, I>) =>
  HttpServerRequest.schemaBodyJson(schema).pipe(
    Effect.mapError((e) => {
      if (e._tag !== "ParseError")
        return new BadRequest({ tag: "InvalidJson", message: "The body is not valid JSON" })
      const invalid = fromParseError(e)
      return new BadRequest({
        tag: "InvalidRequest",
        message: invalid.message,
        details: { param: invalid.param }
      })
    })
  )

/**
 * The events as a `text/event-stream` response, once the first is known: a stream that fails
 * before its first event answers with that error's status. The pull lives in a scope of its own,
 * closed when the stream ends or the client leaves.
 */
export const eventStreamResponse = <A, E extends DomainError>(
  events: Stream.Stream<A, E>,
  frame: (event: A) => string
) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const first = yield* Stream.toPull(events).pipe(
      Scope.extend(scope),
      Effect.flatMap((pull) => Effect.map(Effect.either(pull), (head) => ({ pull, head }))),
      Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : Scope.close(scope, exit)))
    )
    if (Either.isLeft(first.head)) {
      yield* Scope.close(scope, Exit.void)
      if (Option.isSome(first.head.left)) return yield* Effect.fail(toApiError(first.head.left.value))
    }
    const body = Stream.concat(
      Either.isRight(first.head) ? Stream.fromChunk(first.head.right) : Stream.empty,
      Either.isRight(first.head) ? Stream.repeatEffectChunkOption(first.pull) : Stream.empty
    ).pipe(Stream.map(frame), Stream.encodeText, Stream.ensuring(Scope.close(scope, Exit.void)))
    return HttpServerResponse.stream(body, {
      contentType: "text/event-stream",
      headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
    })
  })
