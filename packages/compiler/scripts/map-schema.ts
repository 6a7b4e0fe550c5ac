/** Writes map.schema.json, the published JSON Schema of a session's thinking map (map.json). */
import { writeFileSync } from "node:fs"
import { mapJsonSchema } from "../src/ThinkingMap.ts"

const target = new URL("../map.schema.json", import.meta.url)
writeFileSync(target, `${JSON.stringify(mapJsonSchema(), null, 2)}\n`)
console.log(`wrote ${target.pathname}`)
