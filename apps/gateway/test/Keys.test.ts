import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Option, Redacted } from "effect"
import { describe, expect, it, onTestFinished } from "vitest"
import { parseKeyList, readKeys } from "../src/Keys.ts"
import * as Tenancy from "../src/Tenancy.ts"

describe("API keys", () => {
  it("reads key:tenant lists and key files, and refuses short keys and bad tenant names", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ctxo-keys-"))
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
    const file = join(dir, "keys.json")
    writeFileSync(file, JSON.stringify({ keys: [{ key: "file-key-0123456789", tenant: "initech" }] }))
    const keys = await Effect.runPromise(
      readKeys(
        Option.some(Redacted.make("list-key-0123456789:acme, other-key-0123456789:globex")),
        Option.some(file)
      )
    )
    expect(keys.map((k) => k.tenant)).toEqual(["acme", "globex", "initech"])
    const short = await Effect.runPromise(Effect.flip(parseKeyList("short:acme")))
    expect(short.message).toContain("at least 16 characters")
    const badTenant = await Effect.runPromise(Effect.flip(parseKeyList("long-enough-key-0123:../etc")))
    expect(badTenant.message).toContain("not a valid name")
    // A malformed keys file: one sentence naming the file and the field, never the key or the schema.
    writeFileSync(
      file,
      JSON.stringify({ keys: [{ key: "file-key-0123456789", tenant: "initech" }, { key: 5 }] })
    )
    const bad = await Effect.runPromise(Effect.flip(readKeys(Option.none(), Option.some(file))))
    expect(bad.message).toMatch(/^Invalid API keys in .*keys\.json: keys\[1\]\.key: expected string$/)
    expect(bad.message).not.toContain("file-key-0123456789")
    writeFileSync(file, JSON.stringify({ keys: [{ key: "sk-short-secret", tenant: "initech" }] }))
    const shortKey = await Effect.runPromise(Effect.flip(readKeys(Option.none(), Option.some(file))))
    expect(shortKey.message).toMatch(/keys\[0\]\.key: expected a string at least 16 character/)
    expect(shortKey.message).not.toContain("sk-short-secret")
  })

  it("matches keys by hash, gives each tenant its own data root, and knows the admin key", () => {
    const access = Tenancy.make({
      dataDir: "/srv/ctxo",
      keys: [{ key: "list-key-0123456789", tenant: "acme" }],
      adminKey: Option.some("admin-key-0123456789"),
      maxConcurrent: 4
    })
    expect(access.enabled).toBe(true)
    expect(access.tenantOf("list-key-0123456789")).toEqual(Option.some("acme"))
    expect(access.tenantOf("list-key-012345678X")).toEqual(Option.none())
    expect(access.isAdmin("admin-key-0123456789")).toBe(true)
    expect(access.isAdmin("list-key-0123456789")).toBe(false)
    expect(access.rootOf("acme")).toBe("/srv/ctxo/tenants/acme")
    const open = Tenancy.make({ dataDir: "/srv/ctxo", keys: [], adminKey: Option.none(), maxConcurrent: 4 })
    expect(open.enabled).toBe(false)
    expect(open.rootOf(Tenancy.DEFAULT_TENANT)).toBe("/srv/ctxo")
  })
})
