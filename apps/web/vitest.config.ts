import { defineConfig } from "vitest/config"
import { sharedTest } from "../../vitest.shared.ts"

/** The browser tests: one file, one browser and one gateway at a time (2 CPUs), built page first. */
export default defineConfig({
  test: { ...sharedTest, fileParallelism: false, globalSetup: ["test/setup.ts"] }
})
