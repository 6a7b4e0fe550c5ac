/**
 * A mixed corpus (English, Chinese, code, JSON) from what the installed dependencies ship, so the
 * same lockfile gives the same text: Markdown docs (English), TypeScript's zh-cn/zh-tw diagnostic
 * messages and Chinese READMEs (Chinese), JavaScript sources (code), package manifests (JSON).
 * Each kind is capped so the mix stays balanced; documents are counted one by one.
 */
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join, resolve } from "node:path"

export interface Doc {
  readonly kind: "english" | "chinese" | "code" | "json"
  readonly path: string
  readonly text: string
}

const store = resolve(import.meta.dirname, "../../../node_modules/.pnpm")
const CJK = /[\u4e00-\u9fff]/g

const walk = (dir: string, accept: (name: string) => boolean, out: Array<string>, depth = 0) => {
  if (depth > 10) return
  let entries: Array<import("node:fs").Dirent>
  try {
    entries = readdirSync(dir, { withFileTypes: true })
  } catch {
    return
  }
  for (const entry of entries) {
    const full = join(dir, entry.name)
    if (entry.isDirectory()) walk(full, accept, out, depth + 1)
    else if (entry.isFile() && accept(entry.name)) out.push(full)
  }
}

const take = (
  kind: Doc["kind"],
  paths: Array<string>,
  budget: number,
  read = (p: string) => readFileSync(p, "utf8")
) => {
  const docs: Array<Doc> = []
  const seen = new Set<string>()
  let bytes = 0
  for (const path of paths.sort()) {
    if (bytes >= budget) break
    const size = statSync(path).size
    if (size === 0 || size > 400_000) continue
    const text = read(path)
    if (seen.has(text)) continue
    seen.add(text)
    docs.push({ kind, path: path.slice(store.length + 1), text })
    bytes += Buffer.byteLength(text)
  }
  return docs
}

export const loadMixedCorpus = (perKindBytes = 1_300_000): Array<Doc> => {
  const markdown: Array<string> = []
  const code: Array<string> = []
  const manifests: Array<string> = []
  const chinese: Array<string> = []
  walk(store, (name) => name.endsWith(".md"), markdown)
  walk(store, (name) => name.endsWith(".js") && !name.endsWith(".min.js"), code)
  walk(store, (name) => name.endsWith(".json") && !name.includes("diagnosticMessages"), manifests)
  walk(store, (name) => name === "diagnosticMessages.generated.json" || /^README\.zh/.test(name), chinese)
  const chineseText = (path: string) => {
    const text = readFileSync(path, "utf8")
    // Diagnostic files are JSON maps of message id -> Chinese message: keep the messages.
    return path.endsWith(".json")
      ? Object.values(JSON.parse(text) as Record<string, string>).join("\n")
      : text
  }
  const chineseDocs = take(
    "chinese",
    chinese.filter((p) => !p.endsWith(".json") || /zh-(cn|tw)/.test(p)),
    perKindBytes,
    chineseText
  ).filter((d) => (d.text.match(CJK)?.length ?? 0) > 100)
  return [
    ...take("english", markdown, perKindBytes),
    ...chineseDocs,
    ...take("code", code, perKindBytes),
    ...take("json", manifests, perKindBytes)
  ]
}
