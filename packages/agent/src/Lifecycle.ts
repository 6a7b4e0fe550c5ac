/**
 * A session's lifecycle as rules, pure: `active` takes turns; `paused` takes none until it is
 * resumed; `ended` is final. The legal transitions are active -> paused, paused -> active and
 * active | paused -> ended; asking for the state a session is already in changes nothing (a retry
 * is safe); anything out of `ended` is refused. The controller applies them under the session's
 * lock; the turn engine refuses a turn of a session that is not active.
 */
import { SessionState } from "@ctxo/store/Records"
import { Either, Schema } from "effect"

export type Action = "pause" | "resume" | "end"

/** The state each action leads to. */
export const targetOf: { readonly [A in Action]: SessionState } = {
  pause: "paused",
  resume: "active",
  end: "ended"
}

/** An action that cannot apply to a session in its state (only `ended` refuses: it is final). */
export class IllegalTransition extends Schema.TaggedError<IllegalTransition>("@ctxo/agent/IllegalTransition")(
  "IllegalTransition",
  { sessionId: Schema.String, state: SessionState, action: Schema.Literal("pause", "resume", "end") }
) {
  override get message() {
    return `Session ${this.sessionId} is ${this.state}, so it cannot ${this.action} (${this.state} -> ${targetOf[this.action]}): an ended session is final`
  }
}

/**
 * A session that is not active asked to do what only an active one does (take a turn), or an ended
 * one asked to change (take or change tasks). `operation` says what was refused.
 */
export class SessionNotActive extends Schema.TaggedError<SessionNotActive>("@ctxo/agent/SessionNotActive")(
  "SessionNotActive",
  { sessionId: Schema.String, state: SessionState, operation: Schema.String }
) {
  override get message() {
    return this.state === "paused"
      ? `Session ${this.sessionId} is paused, so it cannot ${this.operation} until it is resumed`
      : `Session ${this.sessionId} is ${this.state}, so it cannot ${this.operation}: an ended session is final`
  }
}

/** The state `action` takes a session in `from` to (`from` itself: nothing changes), or why it cannot. */
export const transition = (
  sessionId: string,
  from: SessionState,
  action: Action
): Either.Either<SessionState, IllegalTransition> => {
  const to = targetOf[action]
  if (from === to) return Either.right(to)
  if (from === "ended") return Either.left(new IllegalTransition({ sessionId, state: from, action }))
  return Either.right(to)
}
