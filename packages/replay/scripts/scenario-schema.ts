/** Writes scenario.schema.json (the published JSON Schema of ctxo.scenario/v1). */
import { writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { scenarioJsonSchema } from "../src/Scenario.ts"

const out = fileURLToPath(new URL("../scenario.schema.json", import.meta.url))
writeFileSync(out, `${JSON.stringify(scenarioJsonSchema(), null, 2)}\n`)
console.log(`wrote ${out}`)
