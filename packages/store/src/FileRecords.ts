/**
 * What the files API says of a session file: its listing entry and its content with a version for
 * `If-Match`. Plain schemas without I/O, so the HTTP contract (`@ctxo/api`) and its clients, a
 * browser's among them, use them without the store's Node code.
 */
import { Schema } from "effect"

export const FileInfo = Schema.Struct({
  path: Schema.String,
  size: Schema.Number,
  version: Schema.String,
  modifiedAt: Schema.String
})
export type FileInfo = typeof FileInfo.Type

export const FileContent = Schema.Struct({
  path: Schema.String,
  content: Schema.String,
  version: Schema.String,
  startLine: Schema.Number,
  endLine: Schema.Number,
  totalLines: Schema.Number,
  modifiedAt: Schema.String
})
export type FileContent = typeof FileContent.Type
