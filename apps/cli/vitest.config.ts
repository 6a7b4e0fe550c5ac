import { defineConfig } from "vitest/config"
import { sharedTest } from "../../vitest.shared.ts"

// The tests run the bundled CLI: the global setup builds it first.
export default defineConfig({ test: { ...sharedTest, globalSetup: ["test/globalSetup.ts"] } })
