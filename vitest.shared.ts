/**
 * What every package's vitest config shares: where tests live, a timeout that survives tiktoken's
 * start-up under turbo's parallel load, and the JSON report `.ci/run` counts passed and failed
 * tests from. Plain data, so it needs no dependency at the repository root.
 */
export const sharedTest = {
  include: ["test/**/*.test.ts"],
  testTimeout: 60_000,
  // Hooks start and stop gateways and upstreams, which take longer under the same load.
  hookTimeout: 60_000,
  reporters: ["default", "json"],
  outputFile: { json: ".reports/vitest.json" }
}
