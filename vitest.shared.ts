/**
 * What every package's vitest config shares: where tests live, a timeout, and the JSON report
 * `.ci/run` counts passed and failed tests from. Plain data, so it needs no dependency at the
 * repository root.
 *
 * The timeout only guards against a hang. The longest tests (a long session replayed and compacted,
 * 80 turns over two gateway replicas on PostgreSQL, a data root moved into PostgreSQL and back) take
 * 25-40 s on a quiet machine and half as long again with three packages' tests at once; in CI, with
 * the eval beside them on 2 CPUs and everything 1.6x slower than that, they come near a minute.
 */
export const sharedTest = {
  include: ["test/**/*.test.ts"],
  testTimeout: 180_000,
  // Hooks start and stop gateways and upstreams, which take longer under the same load.
  hookTimeout: 120_000,
  reporters: ["default", "json"],
  outputFile: { json: ".reports/vitest.json" }
}
