/**
 * The `/openapi.json` the gateway serves is a valid OpenAPI 3.1 document for a strict validator
 * (`@seriousme/openapi-schema-validator`), with no repeated `$id`, a security scheme for the API
 * key, a summary and a unique id on every operation, typed `/v1` bodies, and the session routes
 * under their plural names (the seed's singular paths as deprecated aliases). A client generated
 * from it (`openapi-typescript`) compiles with `tsc`.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Validator } from "@seriousme/openapi-schema-validator"
import openapiTS, { astToString } from "openapi-typescript"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startGateway } from "./harness.ts"

type Operation = {
  operationId?: string
  summary?: string
  deprecated?: boolean
  requestBody?: { content: Record<string, { schema: Record<string, unknown> }> }
  responses: Record<string, { content?: Record<string, { schema: Record<string, unknown> }> }>
}
interface Spec {
  openapi: string
  paths: Record<string, Record<string, Operation>>
  components: {
    schemas: Record<string, unknown>
    securitySchemes?: Record<string, { type: string; scheme?: string }>
  }
  security?: ReadonlyArray<Record<string, unknown>>
}

let gw: Awaited<ReturnType<typeof startGateway>>
let spec: Spec
beforeAll(async () => {
  gw = await startGateway()
  spec = (await (await fetch(`${gw.baseUrl}/openapi.json`)).json()) as Spec
})
afterAll(() => gw.close())

const operations = () =>
  Object.entries(spec.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]) => ({ path, method, op }))
  )

describe("/openapi.json", () => {
  it("passes a strict OpenAPI 3.1 validator", async () => {
    expect(spec.openapi).toMatch(/^3\.1\./)
    const validator = new Validator()
    const result = await validator.validate(structuredClone(spec) as unknown as Record<string, unknown>)
    expect(result.errors ?? []).toEqual([])
    expect(result.valid).toBe(true)
    expect(validator.version).toMatch(/^3\.1/)
  })

  it("has no repeated $id, and a bearer security scheme", () => {
    const ids: Array<string> = []
    const walk = (v: unknown) => {
      if (Array.isArray(v)) v.forEach(walk)
      else if (typeof v === "object" && v !== null)
        for (const [k, x] of Object.entries(v)) {
          if (k === "$id" && typeof x === "string") ids.push(x)
          walk(x)
        }
    }
    walk(spec)
    expect(ids.filter((id, i) => ids.indexOf(id) !== i)).toEqual([])
    expect(spec.components.securitySchemes?.bearer).toMatchObject({ type: "http", scheme: "bearer" })
    expect(spec.security).toContainEqual({ bearer: [] })
  })

  it("has a summary and a unique operationId on every operation", () => {
    const all = operations()
    expect(all.length).toBeGreaterThan(20)
    expect(all.filter(({ op }) => !op.summary).map(({ method, path }) => `${method} ${path}`)).toEqual([])
    const ids = all.map(({ op }) => op.operationId)
    expect(new Set(ids).size).toBe(ids.length)
  })

  it("types the /v1 bodies, and lists the plural session routes with the singular ones as deprecated aliases", () => {
    const chat = spec.paths["/v1/chat/completions"]!.post!
    expect(chat.requestBody?.content["application/json"]?.schema).toEqual({
      $ref: "#/components/schemas/ChatCompletionRequest"
    })
    expect(chat.responses["200"]?.content?.["application/json"]?.schema).toEqual({
      $ref: "#/components/schemas/ChatCompletion"
    })
    expect(
      spec.paths["/v1/models/{id}"]?.get?.responses["200"]?.content?.["application/json"]?.schema
    ).toEqual({
      $ref: "#/components/schemas/Model"
    })
    expect(spec.paths["/api/sessions/{id}/chat"]?.post?.deprecated).toBeUndefined()
    expect(spec.paths["/api/sessions/{id}/context-preview"]?.get).toBeDefined()
    expect(spec.paths["/api/session/{id}/chat"]?.post?.deprecated).toBe(true)
    expect(spec.paths["/api/session/{id}/context-preview"]?.get?.deprecated).toBe(true)
  })

  it("documents the many-sessions routes: lifecycle, tasks and distribution, with their shapes", () => {
    const routes: ReadonlyArray<readonly [string, string]> = [
      ["/api/sessions/{id}", "patch"],
      ["/api/sessions/{id}/pause", "post"],
      ["/api/sessions/{id}/resume", "post"],
      ["/api/sessions/{id}/end", "post"],
      ["/api/sessions/{id}/tasks", "get"],
      ["/api/sessions/{id}/tasks", "post"],
      ["/api/sessions/{id}/tasks/{taskId}", "patch"],
      ["/api/tasks/distribute", "post"]
    ]
    for (const [path, method] of routes)
      expect([path, method, spec.paths[path]?.[method]?.summary]).toEqual([path, method, expect.any(String)])
    const schemas = spec.components.schemas as Record<
      string,
      { required?: Array<string>; enum?: Array<string> }
    >
    expect(schemas.SessionRecord?.required).toEqual(
      expect.arrayContaining(["state", "stateChangedAt", "metadata"])
    )
    expect(schemas.SessionState?.enum).toEqual(["active", "paused", "ended"])
    expect(schemas.TaskStatus?.enum).toEqual(["pending", "in_progress", "done", "cancelled"])
    expect(schemas.SkipReason?.enum).toEqual(["ended", "not_found", "not_matched"])
    const distribute = spec.paths["/api/tasks/distribute"]!.post! as Operation & {
      parameters?: ReadonlyArray<{ name: string; in: string }>
    }
    expect(distribute.parameters).toContainEqual(
      expect.objectContaining({ name: "idempotency-key", in: "header" })
    )
    expect(distribute.responses["200"]?.content?.["application/json"]?.schema).toEqual({
      $ref: "#/components/schemas/Distribution"
    })
    expect(Object.keys(spec.paths["/api/sessions/{id}/pause"]!.post!.responses)).toContain("409")
  })

  it("generates a client (openapi-typescript) that compiles", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ctxo-openapi-client-"))
    try {
      const ast = await openapiTS(structuredClone(spec) as never)
      writeFileSync(join(dir, "api.d.ts"), astToString(ast))
      writeFileSync(
        join(dir, "use.ts"),
        [
          'import type { components, paths } from "./api.js"',
          'type Request = paths["/v1/chat/completions"]["post"]["requestBody"]',
          'type Completion = components["schemas"]["ChatCompletion"]',
          'type Model = paths["/v1/models/{id}"]["get"]["responses"][200]["content"]["application/json"]',
          'export const request: NonNullable<Request>["content"]["application/json"] = { model: "gpt-4o", messages: [{ role: "user", content: "hi" }] }',
          "export const text = (c: Completion): string | null => c.choices[0]?.message.content ?? null",
          "export const window = (m: Model): number => m.context_window",
          ""
        ].join("\n")
      )
      const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
      const out = (() => {
        try {
          execFileSync(
            process.execPath,
            [
              tsc,
              "--noEmit",
              "--strict",
              "--target",
              "es2022",
              "--module",
              "nodenext",
              "--skipLibCheck",
              "false",
              "use.ts"
            ],
            { cwd: dir, encoding: "utf8" }
          )
          return ""
        } catch (e) {
          return String((e as { stdout?: string }).stdout ?? e)
        }
      })()
      expect(out).toBe("")
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)
})
