/** API keys from `CTXO_API_KEYS` (`key1:tenantA,key2:tenantB`) and the JSON file `CTXO_API_KEYS_FILE` names. */
import { readFileSync } from "node:fs"
import { clipFile, clipSentence, firstProblem } from "@ctxo/store/DecodeError"
import { Effect, Option, Redacted, Schema } from "effect"

export const TENANT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/

export class InvalidKeys extends Schema.TaggedError<InvalidKeys>("@ctxo/gateway/InvalidKeys")("InvalidKeys", {
  source: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return clipSentence(`Invalid API keys in ${clipFile(this.source)}: ${this.reason}`)
  }
}

const KeysFile = Schema.Struct({
  keys: Schema.Array(Schema.Struct({ key: Schema.String.pipe(Schema.minLength(16)), tenant: Schema.String }))
})

/** Parses `key1:tenantA,key2:tenantB`. */
export const parseKeyList = (text: string, source = "CTXO_API_KEYS") =>
  Effect.forEach(
    text
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== ""),
    (entry) => {
      const at = entry.lastIndexOf(":")
      const key = entry.slice(0, at)
      const tenant = entry.slice(at + 1)
      if (at <= 0 || key.length < 16)
        return Effect.fail(
          new InvalidKeys({ source, reason: "each entry is key:tenant with a key of at least 16 characters" })
        )
      if (!TENANT_ID.test(tenant))
        return Effect.fail(
          new InvalidKeys({ source, reason: `tenant ${JSON.stringify(tenant)} is not a valid name` })
        )
      return Effect.succeed({ key, tenant })
    }
  )

/** Reads the keys: `CTXO_API_KEYS` and the file `CTXO_API_KEYS_FILE` names. */
export const readKeys = (list: Option.Option<Redacted.Redacted<string>>, file: Option.Option<string>) =>
  Effect.gen(function* () {
    const fromList = Option.isSome(list) ? yield* parseKeyList(Redacted.value(list.value)) : []
    const fromFile = Option.isSome(file)
      ? yield* Effect.try({
          try: () => readFileSync(file.value, "utf8"),
          catch: (e) => new InvalidKeys({ source: file.value, reason: String(e) })
        }).pipe(
          Effect.flatMap((text) =>
            Schema.decodeUnknown(Schema.parseJson(KeysFile))(text).pipe(
              Effect.mapError((e) => {
                const { path, problem } = firstProblem(e)
                // A key's value is a secret: the problem without what was given.
                const shown = /(^|\.)key$/.test(path) ? problem.replace(/, got [\s\S]*$/, "") : problem
                return new InvalidKeys({ source: file.value, reason: `${path}: ${shown}` })
              })
            )
          ),
          Effect.map((f) => f.keys)
        )
      : []
    return [...fromList, ...fromFile]
  })
