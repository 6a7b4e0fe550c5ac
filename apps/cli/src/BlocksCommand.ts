import type { Block } from "@ctxo/blocks/Block"
import { blockText, toLines } from "@ctxo/blocks/Block"
import { decodeSidecar, encodeSidecar, sidecarPath, syncBlockIds } from "@ctxo/blocks/BlockIds"
import { resolveBlock } from "@ctxo/blocks/BlockResolver"
import { parseJsonBlocks } from "@ctxo/blocks/JsonBlocks"
import { parseMarkdownBlocks } from "@ctxo/blocks/MarkdownBlocks"
import { writeFileAtomic } from "@ctxo/history/HistoryStore"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Console, Effect, Option } from "effect"
import type { Example } from "./internal/help.ts"
import { renderTree } from "./internal/tree.ts"

const file = Args.file({ name: "file", exists: "yes" }).pipe(
  Args.withDescription(
    "A Markdown file (blocks by heading: ATX and setext, front matter skipped) or a .json file (blocks by key path)."
  )
)
const json = Options.boolean("json").pipe(
  Options.withDescription(
    "Print the block tree as JSON: each block's id, heading, level, line range, content and children."
  )
)
const get = Options.text("get").pipe(
  Options.withPseudoName("REF"),
  Options.withDescription(
    "Print the text of one block, heading and children included: a heading path (Parent/Child, `/` inside a heading written `\\/`) or a short id (^b3). A renamed heading resolves to its closest match with a warning on stderr."
  ),
  Options.optional
)
const syncIds = Options.boolean("sync-ids").pipe(
  Options.withDescription(
    "Assign persistent short ids (b1, b2, ...) and write them to <file>.blocks.json: a renamed or moved heading keeps its id, a deleted heading's id is never reused. Prints what changed on stderr."
  )
)

export const blocksCommand = Command.make("blocks", { file, json, get, syncIds }, (args) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const content = yield* fs.readFileString(args.file)
    let blocks: Array<Block> = args.file.toLowerCase().endsWith(".json")
      ? yield* parseJsonBlocks(content, args.file)
      : parseMarkdownBlocks(content, args.file)

    const sidecarFile = sidecarPath(args.file)
    const previous = (yield* fs.exists(sidecarFile))
      ? yield* decodeSidecar(yield* fs.readFileString(sidecarFile), sidecarFile)
      : undefined
    if (previous !== undefined || args.syncIds) {
      const synced = syncBlockIds(blocks, previous, path.basename(args.file))
      blocks = synced.blocks
      if (args.syncIds && synced.changed) {
        yield* writeFileAtomic(sidecarFile, encodeSidecar(synced.sidecar))
        const { added, renamed, removed } = synced.changes
        yield* Console.error(
          `${sidecarFile}: ${added.length} added, ${renamed.length} renamed, ${removed.length} removed`
        )
        for (const r of renamed) yield* Console.error(`  ^${r.id}: ${r.from} -> ${r.to}`)
      }
    }

    if (Option.isSome(args.get)) {
      const resolution = yield* resolveBlock(blocks, args.get.value, {
        file: args.file,
        ...(previous === undefined ? {} : { sidecar: previous })
      })
      if (resolution.warning !== undefined) yield* Console.error(`warning: ${resolution.warning}`)
      yield* Console.log(blockText(content, resolution.block))
    } else if (args.json) {
      yield* Console.log(JSON.stringify(blocks, null, 2))
    } else {
      yield* Console.log(renderTree(args.file, blocks, toLines(content).length))
    }
  })
).pipe(
  Command.withDescription(
    "List the blocks of a Markdown or JSON file as a tree (id, line range, short id), or print one block's text. Errors name the file, line and column, or the reference."
  )
)

export const blocksExamples: ReadonlyArray<Example> = [
  { says: "The block tree of a profile:", command: "ctxo blocks fixtures/docs/profile.md" },
  {
    says: "One block by its heading path:",
    command: "ctxo blocks fixtures/docs/profile.md --get 基本信息/教育背景"
  },
  {
    says: "Give every heading a short id, then print a block by it:",
    command: "ctxo blocks notes.md --sync-ids && ctxo blocks notes.md --get ^b2"
  }
]
