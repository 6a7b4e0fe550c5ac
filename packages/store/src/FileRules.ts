/**
 * The rules of the files API that every store applies the same way (the file store, the store in
 * memory, the store in PostgreSQL): who may write which file, `If-Match` versions, line ranges to
 * read and to replace. Pure; `internal/fileEdits.ts` has them.
 */
export {
  contentOf,
  nextText,
  readRefusal,
  splitLines,
  versionCheck,
  versionOf,
  writeRefusal
} from "./internal/fileEdits.ts"
