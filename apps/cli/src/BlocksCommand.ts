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
import { renderTree } from "./internal/tree.ts"

const file = Args.file({ name: "file", exists: "yes" }).pipe(
  Args.withDescription("A Markdown file (blocks by heading) or a .json file (blocks by key path)")
)
const json = Options.boolean("json").pipe(Options.withDescription("Print the block tree as JSON"))
const get = Options.text("get").pipe(
  Options.withDescription(
    "Print the text of one block: a heading path (Parent/Child) or a short id (^b3). A renamed heading resolves to its closest match with a warning."
  ),
  Options.optional
)
const syncIds = Options.boolean("sync-ids").pipe(
  Options.withDescription(
    "Assign persistent short ids and write them to <file>.blocks.json (kept across renames)"
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
).pipe(Command.withDescription("List the blocks of a Markdown or JSON file, or print one block"))
