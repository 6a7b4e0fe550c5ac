/**
 * The history journal's format, pure: a session's `messages.journal` beside its `messages.json`.
 *
 * A recorded change is one line of JSON, `{"seq":N,"sum":"xxxxxxxx","patch":{...}}` and "\n". The
 * patch keeps the first `keep` messages of the document and puts `messages` after them; `set`
 * replaces top-level fields whole (`compression`, `format`). `seq` counts records from 1 and goes
 * on across folds; `sum` is the first 8 hex digits of the SHA-256 of `<seq>:<patch>` (the patch as
 * written), so a line cut short or garbled is told from a good one.
 *
 * Reading keeps the good lines in order. The last line may be torn (a write cut by a crash: no
 * newline, not a record, a wrong checksum): it is left out, and the next append cuts it off. A bad
 * line with another line after it is corruption (`JournalProblem`: its line number and why).
 *
 * A fold writes the whole document into `messages.json` with `journalSeq`, the last record it
 * holds; records up to it are skipped on read, so a journal left behind by a crash between the
 * fold's write and the journal's removal applies nothing twice.
 */
import { createHash } from "node:crypto"
import { Either } from "effect"

/** One change of a history document (documents are immutable: unchanged messages are the same objects). */
export interface HistoryPatch {
  /** How many messages of the document before stay, from the first. */
  readonly keep: number
  /** The messages after them. */
  readonly messages: ReadonlyArray<unknown>
  /** Top-level fields (other than `messages`) that changed, whole. */
  readonly set?: Readonly<Record<string, unknown>>
}

/** The field of a folded `messages.json` that says which journal records it holds (the store's, not history's). */
export const JOURNAL_SEQ = "journalSeq"

/** A good line of the journal: its record number, its line (from 1) and the patch as written. */
export interface JournalRecord {
  readonly seq: number
  readonly line: number
  readonly payload: string
}

/** The good records of a journal, and how many bytes they take from its start. */
export interface JournalLines {
  readonly records: ReadonlyArray<JournalRecord>
  readonly validBytes: number
  /** A torn last line follows them (it is cut off before the next append). */
  readonly torn: boolean
}

/** Why a journal cannot be read: the line (from 1) and the reason. */
export interface JournalProblem {
  readonly line: number
  readonly reason: string
}

const checksum = (seq: number, payload: string) =>
  createHash("sha256").update(`${seq}:${payload}`).digest("hex").slice(0, 8)

/**
 * Whether parsing `value`'s JSON gives back the same data: plain objects and arrays of strings,
 * booleans, null and finite numbers, nothing JSON drops or changes (an undefined field, a function,
 * a Date, NaN, -0, a class, an array's hole, subclass or extra field, a symbol or non-enumerable
 * key). A getter is read as its value. A record's patch that is keeps its own objects in the
 * document the store holds, without a parse: history's document and the store's JSON then share
 * their messages instead of holding a copy each.
 */
export const jsonExact = (value: unknown): boolean => {
  switch (typeof value) {
    case "string":
    case "boolean":
      return true
    case "number":
      return Number.isFinite(value) && !Object.is(value, -0)
    case "object":
      break
    default:
      return false
  }
  if (value === null) return true
  if (Array.isArray(value)) {
    if (
      Object.getPrototypeOf(value) !== Array.prototype ||
      Reflect.ownKeys(value).length !== value.length + 1
    )
      return false
    for (const item of value) if (!jsonExact(item)) return false
    return true
  }
  const proto = Object.getPrototypeOf(value)
  if (proto !== Object.prototype && proto !== null) return false
  const keys = Object.keys(value)
  if (Reflect.ownKeys(value).length !== keys.length) return false
  for (const key of keys) if (!jsonExact((value as Record<string, unknown>)[key])) return false
  return true
}

/** The journal line of record `seq` (with its "\n"), and the patch's text in it. */
export const recordLine = (
  seq: number,
  patch: HistoryPatch
): { readonly line: string; readonly payload: string } => {
  const payload = JSON.stringify(patch)
  return { line: `{"seq":${seq},"sum":"${checksum(seq, payload)}","patch":${payload}}\n`, payload }
}

// `s`: JSON.stringify leaves U+2028 and U+2029 as they are, and `.` would stop at them.
const RECORD = /^\{"seq":(\d{1,15}),"sum":"([0-9a-f]{8})","patch":(.*)\}$/s

/** Why a line is not the record that should come after `previous` (undefined when it is). */
const lineProblem = (content: string, previous: number | undefined): string | JournalRecord => {
  const match = RECORD.exec(content)
  if (match === null) return "not a journal record"
  const seq = Number(match[1])
  const payload = match[3]!
  if (checksum(seq, payload) !== match[2]) return "its checksum does not match its content"
  if (previous !== undefined && seq !== previous + 1) return `record ${seq} follows record ${previous}`
  return { seq, line: 0, payload }
}

/** The journal's good records; a bad line before another line is corruption. */
export const readJournal = (text: string): Either.Either<JournalLines, JournalProblem> => {
  const records: Array<JournalRecord> = []
  let validBytes = 0
  let start = 0
  let line = 0
  let bad: JournalProblem | undefined
  while (start < text.length) {
    line++
    if (bad !== undefined) return Either.left(bad)
    const end = text.indexOf("\n", start)
    if (end === -1) return Either.right({ records, validBytes, torn: true })
    const content = text.slice(start, end)
    const checked = lineProblem(content, records.at(-1)?.seq)
    if (typeof checked === "string") bad = { line, reason: checked }
    else {
      records.push({ ...checked, line })
      validBytes += Buffer.byteLength(content, "utf8") + 1
    }
    start = end + 1
  }
  return Either.right({ records, validBytes, torn: bad !== undefined })
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The records a folded `messages.json` already holds (0 when it says none). */
export const journalSeqOf = (json: unknown): number => {
  const seq = isObject(json) ? json[JOURNAL_SEQ] : undefined
  return typeof seq === "number" && Number.isSafeInteger(seq) && seq > 0 ? seq : 0
}

/** The change from `before` to `after`, comparing messages by reference; undefined when nothing changed. */
export const diffHistory = <D extends { readonly messages: ReadonlyArray<unknown> }>(
  before: D | undefined,
  after: D
): HistoryPatch | undefined => {
  const fields = after as unknown as Readonly<Record<string, unknown>>
  const old = before as unknown as Readonly<Record<string, unknown>> | undefined
  const set: Record<string, unknown> = {}
  let changed = false
  for (const key of Object.keys(fields)) {
    if (key === "messages" || fields[key] === undefined || fields[key] === old?.[key]) continue
    set[key] = fields[key]
    changed = true
  }
  const was = before?.messages ?? []
  const now = after.messages
  let keep = 0
  const common = Math.min(was.length, now.length)
  while (keep < common && was[keep] === now[keep]) keep++
  if (!changed && keep === was.length && keep === now.length) return undefined
  return { keep, messages: now.slice(keep), ...(changed ? { set } : {}) }
}

/** The patch's shape checked (it was read from a file). */
const asPatch = (value: unknown): HistoryPatch | undefined =>
  isObject(value) &&
  typeof value.keep === "number" &&
  Number.isSafeInteger(value.keep) &&
  value.keep >= 0 &&
  Array.isArray(value.messages) &&
  (value.set === undefined || isObject(value.set))
    ? (value as unknown as HistoryPatch)
    : undefined

/**
 * `doc` with `patch` applied, as a new object (a document that is not an object, or none, is an
 * empty one). Fails when the patch keeps more messages than the document has.
 */
export const applyPatch = (
  doc: unknown,
  patch: HistoryPatch
): Either.Either<Record<string, unknown>, string> => {
  const next: Record<string, unknown> = isObject(doc) ? { ...doc } : {}
  const messages = Array.isArray(next.messages) ? (next.messages as ReadonlyArray<unknown>) : []
  if (patch.keep > messages.length)
    return Either.left(`it keeps ${patch.keep} messages of a history that has ${messages.length}`)
  Object.assign(next, patch.set)
  next.messages = messages.slice(0, patch.keep).concat(patch.messages)
  return Either.right(next)
}

/**
 * `messages.json`'s JSON (`base`, holding the records up to `journalSeqOf(base)`) with the journal's
 * later records applied, and the last record it then holds. `journalSeq` is left out of the result:
 * the folded document is history's; the number is the store's. `base` is not changed.
 */
export const foldJournal = (
  base: unknown,
  records: ReadonlyArray<JournalRecord>
): Either.Either<
  { readonly json: unknown; readonly seq: number; readonly applied: number },
  JournalProblem
> => {
  const baseSeq = journalSeqOf(base)
  const first = records.findIndex((r) => r.seq > baseSeq)
  const withoutSeq = (json: unknown) => {
    if (!isObject(json) || !Object.hasOwn(json, JOURNAL_SEQ)) return json
    const { [JOURNAL_SEQ]: _, ...rest } = json
    return rest
  }
  if (first === -1) return Either.right({ json: withoutSeq(base), seq: baseSeq, applied: 0 })
  const head = records[first]!
  if (head.seq !== baseSeq + 1)
    return Either.left({
      line: head.line,
      reason: `record ${head.seq} does not follow messages.json, which holds the records up to ${baseSeq}`
    })
  const doc: Record<string, unknown> = isObject(base) ? (withoutSeq(base) as Record<string, unknown>) : {}
  // One working copy of the messages, changed in place record by record.
  const messages: Array<unknown> = Array.isArray(doc.messages) ? [...(doc.messages as Array<unknown>)] : []
  const fields: Record<string, unknown> = { ...doc }
  for (let i = first; i < records.length; i++) {
    const record = records[i]!
    let parsed: unknown
    try {
      parsed = JSON.parse(record.payload)
    } catch {
      return Either.left({ line: record.line, reason: "its patch is not JSON" })
    }
    const patch = asPatch(parsed)
    if (patch === undefined)
      return Either.left({ line: record.line, reason: "its patch is not a history change" })
    if (patch.keep > messages.length)
      return Either.left({
        line: record.line,
        reason: `it keeps ${patch.keep} messages of a history that has ${messages.length}`
      })
    messages.length = patch.keep
    for (const m of patch.messages) messages.push(m)
    Object.assign(fields, patch.set)
  }
  fields.messages = messages
  return Either.right({ json: fields, seq: records.at(-1)!.seq, applied: records.length - first })
}

/** `json` as `messages.json` holds it after a fold: with the last record it holds. */
export const withJournalSeq = (json: unknown, seq: number): unknown =>
  seq > 0 && isObject(json) ? { ...json, [JOURNAL_SEQ]: seq } : json

/**
 * messages.json's text with the journal's text folded in, as the store reads the two files (for
 * tools and tests that look at a data root's files); undefined when there is neither. Fails with
 * the journal's problem, or when messages.json is not JSON while the journal has records for it.
 */
export const foldHistoryText = (
  messages: string | undefined,
  journal: string | undefined
): Either.Either<string | undefined, JournalProblem | string> => {
  if (journal === undefined) return Either.right(messages)
  const lines: Either.Either<JournalLines, JournalProblem | string> = readJournal(journal)
  return Either.flatMap(lines, ({ records }): Either.Either<string | undefined, JournalProblem | string> => {
    if (records.length === 0) return Either.right(messages)
    let base: unknown
    try {
      base = messages === undefined ? undefined : JSON.parse(messages)
    } catch {
      return Either.left("messages.json is not JSON")
    }
    return Either.map(foldJournal(base, records), ({ json, seq, applied }) =>
      applied === 0 ? messages : `${JSON.stringify(withJournalSeq(json, seq), null, 2)}\n`
    )
  })
}
