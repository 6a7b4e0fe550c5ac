/**
 * The real-world Markdown corpus used by the conformance test and the benchmark: every README,
 * CHANGELOG and doc file that the installed dependencies ship (the workspace's node_modules/.pnpm
 * store), plus this repository's own Markdown. Deduplicated by content and sorted by path, so the
 * same lockfile gives the same corpus.
 */
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join, relative, resolve } from "node:path"

export interface CorpusFile {
  readonly path: string
  readonly content: string
}

const repoRoot = resolve(import.meta.dirname, "../../..")
const MAX_FILE_BYTES = 1024 * 1024

const walk = (dir: string, out: Array<string>, depth: number) => {
  if (depth > 12) return
  let entries: Array<import("node:fs").Dirent>
  try {
    entries = readdirSync(dir, { withFileTypes: true })
  } catch {
    return
  }
  for (const entry of entries) {
    const full = join(dir, entry.name)
    if (entry.isDirectory()) {
      if (entry.name === ".git" || entry.name === ".turbo" || (entry.name === "dist" && dir === repoRoot))
        continue
      walk(full, out, depth + 1)
    } else if (entry.isFile() && /\.(md|markdown)$/i.test(entry.name)) {
      out.push(full)
    }
  }
}

export const loadCorpus = (): Array<CorpusFile> => {
  const paths: Array<string> = []
  walk(join(repoRoot, "node_modules", ".pnpm"), paths, 0)
  for (const top of ["README.md", "fixtures", "evals", "packages", "apps"]) {
    const full = join(repoRoot, top)
    try {
      if (statSync(full).isDirectory()) {
        const local: Array<string> = []
        walk(full, local, 0)
        paths.push(...local.filter((p) => !p.includes("node_modules")))
      } else paths.push(full)
    } catch {
      // not there yet
    }
  }
  const seen = new Set<string>()
  const files: Array<CorpusFile> = []
  for (const path of paths.sort()) {
    let size: number
    try {
      size = statSync(path).size
    } catch {
      continue
    }
    if (size === 0 || size > MAX_FILE_BYTES) continue
    const content = readFileSync(path, "utf8")
    if (seen.has(content)) continue
    seen.add(content)
    files.push({ path: relative(repoRoot, path), content })
  }
  return files
}
