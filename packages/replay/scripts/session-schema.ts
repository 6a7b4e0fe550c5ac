/** Writes session.schema.json (the published JSON Schema of ctxo.session/v1). */
import { writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { sessionJsonSchema } from "../src/Session.ts"

const out = fileURLToPath(new URL("../session.schema.json", import.meta.url))
writeFileSync(out, `${JSON.stringify(sessionJsonSchema(), null, 2)}\n`)
console.log(`wrote ${out}`)
