/**
 * The labelled sets under `fixtures/retrieval/`, read from disk (for the benchmark and the tests):
 * the knowledge set (Markdown files -> blocks, and the questions naming the block that answers
 * them) and the conversation set.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import type { FileBlock } from "../src/FileIndex.ts"
import { documentId } from "../src/FileIndex.ts"
import { markdownFileBlocks } from "../src/MarkdownSource.ts"
import type { Document } from "../src/SearchIndex.ts"

export const fixturesRoot = fileURLToPath(new URL("../../../fixtures/retrieval/", import.meta.url))
export const knowledgeRoot = join(fixturesRoot, "knowledge")
export const conversationsRoot = join(fixturesRoot, "conversations")

export interface KnowledgeFile {
  readonly path: string
  readonly content: string
  readonly blocks: ReadonlyArray<FileBlock>
}

export interface KnowledgeQuestion {
  readonly id: string
  readonly lang: "en" | "zh"
  readonly question: string
  /** `<path>#<block id>` */
  readonly block: string
  /** `content`: the block's headings do not name the answer, its body does. */
  readonly kind: "content" | "heading"
}

/** The Markdown files of the knowledge set, sorted by path (`/` separated, relative). */
export const knowledgeFiles = (): Array<KnowledgeFile> =>
  readdirSync(knowledgeRoot, { recursive: true, encoding: "utf8" })
    .map((p) => p.split("\\").join("/"))
    .filter((p) => p.endsWith(".md"))
    .sort()
    .map((path) => {
      const content = readFileSync(join(knowledgeRoot, path), "utf8")
      return { path, content, blocks: markdownFileBlocks(content, path) }
    })

export const knowledgeQuestions = (): Array<KnowledgeQuestion> =>
  (
    JSON.parse(readFileSync(join(knowledgeRoot, "questions.json"), "utf8")) as {
      questions: Array<KnowledgeQuestion>
    }
  ).questions

/** Every block of the knowledge set as a search document (id `<path>#<block id>`). */
export const knowledgeDocuments = (files: ReadonlyArray<KnowledgeFile>): Array<Document> =>
  files.flatMap((file) =>
    file.blocks.map((block) => ({
      id: documentId(file.path, block.id),
      text: block.text,
      ...(block.title === undefined ? {} : { title: block.title }),
      meta: { path: file.path }
    }))
  )
