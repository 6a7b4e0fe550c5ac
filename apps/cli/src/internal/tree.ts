import type { Block } from "@ctxo/blocks/Block"

const lines = (block: Block): string => {
  const { startLine, endLine } = block.source
  return startLine === endLine ? `L${startLine}` : `L${startLine}-${endLine}`
}

/**
 * A block tree as a person reads it: one block a line, indented by depth, with its id, line range
 * and short id when it has one.
 *
 *   profile.md: 4 blocks, 12 lines
 *   ├─ 基本信息  L1-10
 *   │  ├─ 基本信息/教育背景  L4-7
 */
export const renderTree = (file: string, blocks: ReadonlyArray<Block>, lineCount: number): string => {
  let count = 0
  const out: Array<string> = []
  const visit = (list: ReadonlyArray<Block>, prefix: string) => {
    list.forEach((block, i) => {
      count++
      const last = i === list.length - 1
      const shortId = block.shortId === undefined ? "" : `  ^${block.shortId}`
      out.push(`${prefix}${last ? "└─" : "├─"} ${block.id}  ${lines(block)}${shortId}`)
      visit(block.children, `${prefix}${last ? "   " : "│  "}`)
    })
  }
  visit(blocks, "")
  const header = `${file}: ${count} block${count === 1 ? "" : "s"}, ${lineCount} line${lineCount === 1 ? "" : "s"}`
  return [header, ...out].join("\n")
}
