/**
 * The gateway's JSON log lines (`CTXO_LOG_FORMAT=json`): each line is Effect's JSON logger's
 * (`Logger.jsonLogger`: message, logLevel, timestamp, cause, annotations, spans, fiberId), written
 * to stdout in one call. Effect's own `Logger.json` writes through `console.log`, whose formatting
 * and colour checks took about 35 us of every request's access log line; and the lane's access
 * line (`infoLogger`) is one `JSON.stringify` of plain values.
 */
import {
  Cause,
  Context,
  FiberId,
  FiberRef,
  FiberRefs,
  HashMap,
  HashSet,
  type Layer,
  List,
  Logger,
  LogLevel,
  Option,
  type Runtime,
  Tracer
} from "effect"

const write = (line: string) => {
  process.stdout.write(`${line}\n`)
}

/** Effect's JSON log line, to stdout. */
export const jsonLogger: Logger.Logger<unknown, void> = Logger.make((options) =>
  write(Logger.jsonLogger.log(options))
)

/** The gateway's loggers when it logs JSON: this one in place of the default. */
export const json: Layer.Layer<never> = Logger.replace(Logger.defaultLogger, jsonLogger)

const isPlain = (value: unknown) =>
  value === null ||
  value === undefined ||
  typeof value === "string" ||
  typeof value === "number" ||
  typeof value === "boolean"

/**
 * An info line as `Effect.logInfo` writes it in `runtime`, with no fiber run for it: the access log
 * line of every request. With `jsonLogger` installed (and Effect's tracer logger, with no span to
 * add the line to) and plain annotations, the line is made here, field for field as Effect's JSON
 * logger makes it; with any other logger (the readable one, a test's), it goes to the runtime's
 * loggers as Effect would send it.
 */
export const infoLogger = (runtime: Runtime.Runtime<never>) => {
  const refs = runtime.fiberRefs
  const loggers = FiberRefs.getOrDefault(refs, FiberRef.currentLoggers)
  const minimum = FiberRefs.getOrDefault(refs, FiberRef.currentMinimumLogLevel)
  const inherited = FiberRefs.getOrDefault(refs, FiberRef.currentLogAnnotations)
  const spans = FiberRefs.getOrDefault(refs, FiberRef.currentLogSpan)
  const fiberId = FiberId.make(-1, Date.now())
  const quiet = LogLevel.lessThan(LogLevel.Info, minimum)
  const toLoggers = (message: string, annotations: Record<string, unknown>) => {
    let all = inherited
    for (const key in annotations) all = HashMap.set(all, key, annotations[key])
    const date = new Date()
    for (const logger of loggers)
      logger.log({
        fiberId,
        logLevel: LogLevel.Info,
        message,
        cause: Cause.empty,
        context: refs,
        spans,
        annotations: all,
        date
      })
  }
  // Effect's tracer logger beside it adds the line to the current span, and the runtime has none.
  const span = Context.getOption(FiberRefs.getOrDefault(refs, FiberRef.currentContext), Tracer.ParentSpan)
  const spanless = Option.isNone(span) || span.value._tag === "ExternalSpan"
  const others = [...loggers].filter((l) => l !== jsonLogger && !(l === Logger.tracerLogger && spanless))
  const inheritedPlain = [...inherited].every(([, v]) => isPlain(v))
  if (!HashSet.has(loggers, jsonLogger) || others.length > 0 || !List.isNil(spans) || !inheritedPlain)
    return (message: string, annotations: Record<string, unknown>) => {
      if (!quiet) toLoggers(message, annotations)
    }
  const base = Object.fromEntries(inherited)
  const thread = FiberId.threadName(fiberId)
  return (message: string, annotations: Record<string, unknown>) => {
    if (quiet) return
    for (const key in annotations)
      if (!isPlain(annotations[key])) {
        toLoggers(message, annotations)
        return
      }
    write(
      JSON.stringify({
        message,
        logLevel: LogLevel.Info.label,
        timestamp: new Date().toISOString(),
        annotations: { ...base, ...annotations },
        spans: {},
        fiberId: thread
      })
    )
  }
}
