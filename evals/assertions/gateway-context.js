// The gateway answered through the local model, and with a session it added the session's context:
// the reply counts the messages the model received (1 without a session, more with one).
export default (output, context) => {
  const match = /I received (\d+) messages, about (\d+) tokens of context\. You said: (.*)$/s.exec(output)
  if (!match)
    return { pass: false, score: 0, reason: `not the local model's reply: ${String(output).slice(0, 200)}` }
  const messages = Number(match[1])
  const question = context.vars.question
  if (!match[3].startsWith(question))
    return { pass: false, score: 0, reason: `the model did not get the question: ${match[3]}` }
  const session = context.provider?.label !== "gateway-proxy"
  if (session && messages < 3)
    return {
      pass: false,
      score: 0,
      reason: `with a session the model got only ${messages} messages: no server-side context`
    }
  if (!session && messages !== 1)
    return {
      pass: false,
      score: 0,
      reason: `without a session the model should get the client's 1 message, got ${messages}`
    }
  return { pass: true, score: 1, reason: `${messages} messages (${match[2]} tokens) reached the model` }
}
