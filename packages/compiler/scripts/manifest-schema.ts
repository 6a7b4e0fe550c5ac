/** Writes manifest.schema.json, the published JSON Schema of context-config.json. */
import { writeFileSync } from "node:fs"
import { manifestJsonSchema } from "../src/Manifest.ts"

const target = new URL("../manifest.schema.json", import.meta.url)
writeFileSync(target, `${JSON.stringify(manifestJsonSchema(), null, 2)}\n`)
console.log(`wrote ${target.pathname}`)
