/**
 * A Markdown file as the blocks `FileIndex` indexes: one per heading section, in document order.
 *
 * A block's text is its own section: the heading line and the body down to its first child heading
 * (for a block without children that is `blockText`). Children are blocks of their own, so no text
 * is indexed twice and a hit points at the smallest section that holds the words. The title is the
 * heading path (`Deploying Tally / Rollback`), so the parents' headings count as title words too.
 * A heading with no body of its own (only children) is skipped: it has nothing to answer with.
 */
import type { Block } from "@ctxo/blocks/Block"
import { blockText, flattenBlocks, sliceLines } from "@ctxo/blocks/Block"
import { parseMarkdownBlocks } from "@ctxo/blocks/MarkdownBlocks"
import type { FileBlock } from "./FileIndex.ts"

/** The text of a block without its children. */
export const ownText = (content: string, block: Block): string => {
  const firstChild = block.children[0]
  if (firstChild === undefined) return blockText(content, block)
  return sliceLines(content, block.source.startLine, firstChild.source.startLine - 1).replace(
    /(\n[ \t]*)+$/,
    ""
  )
}

export const markdownFileBlocks = (content: string, path: string): Array<FileBlock> => {
  const out: Array<FileBlock> = []
  const visit = (blocks: ReadonlyArray<Block>, parents: ReadonlyArray<string>) => {
    for (const block of blocks) {
      const headings = block.level === 0 ? parents : [...parents, block.heading]
      if (block.content.trim() !== "") {
        out.push({
          id: block.id,
          text: ownText(content, block),
          ...(headings.length === 0 ? {} : { title: headings.join(" / ") })
        })
      }
      visit(block.children, headings)
    }
  }
  visit(parseMarkdownBlocks(content, path), [])
  return out
}

/** Every block id of a Markdown file, with or without a body (for checking references). */
export const markdownBlockIds = (content: string, path: string): Array<string> =>
  flattenBlocks(parseMarkdownBlocks(content, path)).map((b) => b.id)
