/**
 * Blocks: the heading tree of the profile and of a session file, each block a checkbox. Ticking a
 * profile block writes `profileBlocks`, ticking a file's block writes `references` (`{ path, block }`)
 * of the session's `context-config.json`, with the version it was read at (`If-Match`): when the file
 * changed meanwhile (another tab, an editor, the agent), the write is refused and the page says so
 * instead of overwriting it. Beside the trees, the next request's layers, compiled again after
 * every write.
 */
import type { BlockNode } from "@ctxo/api/Api"
import { describeError } from "@ctxo/client/Client"
import { readPreview } from "@ctxo/client/Preview"
import {
  Alert,
  Box,
  Button,
  Checkbox,
  Grid,
  Group,
  NativeSelect,
  Paper,
  Stack,
  Text,
  Title
} from "@mantine/core"
import { Either } from "effect"
import { useState } from "react"
import { useApi } from "../connection.tsx"
import { Show, useLoad } from "../ui.tsx"
import { BudgetBar, LayerTable } from "./Context.tsx"

const CONFIG = "context-config.json"
const SAMPLE_INPUT = "(the next message)"

type Config = Record<string, unknown>
type Reference = { readonly path: string; readonly block: string }

interface ConfigFile {
  readonly config: Config
  /** The version read ("" when there is no file yet: the write must create it). */
  readonly version: string
}

const profileBlocksOf = (config: Config): ReadonlyArray<string> =>
  Array.isArray(config.profileBlocks)
    ? config.profileBlocks.filter((b): b is string => typeof b === "string")
    : []

const isBlockRef = (r: unknown): r is Reference =>
  typeof r === "object" &&
  r !== null &&
  typeof (r as Reference).path === "string" &&
  typeof (r as Reference).block === "string"

const referencesOf = (config: Config): ReadonlyArray<unknown> =>
  Array.isArray(config.references) ? config.references : []

/** The config with `id` ticked or not in `profileBlocks`. */
export const withProfileBlock = (config: Config, id: string, on: boolean): Config => {
  const rest = profileBlocksOf(config).filter((b) => b !== id)
  return { ...config, profileBlocks: on ? [...rest, id] : rest }
}

/** The config with `{ path, block }` ticked or not in `references` (other references kept as they are). */
export const withReference = (config: Config, path: string, block: string, on: boolean): Config => {
  const rest = referencesOf(config).filter((r) => !(isBlockRef(r) && r.path === path && r.block === block))
  return { ...config, references: on ? [...rest, { path, block }] : rest }
}

const Tree = ({
  blocks,
  checked,
  onToggle,
  disabled,
  label
}: {
  readonly blocks: ReadonlyArray<BlockNode>
  readonly checked: (id: string) => boolean
  readonly onToggle: (id: string, on: boolean) => void
  readonly disabled: boolean
  readonly label: string
}) => {
  const render = (nodes: ReadonlyArray<BlockNode>, depth: number) => (
    <Box
      component="ul"
      role={depth === 0 ? "group" : undefined}
      aria-label={depth === 0 ? label : undefined}
      style={{ listStyle: "none", margin: 0, paddingLeft: depth === 0 ? 0 : 20 }}
    >
      {nodes.map((b) => (
        <li key={b.id}>
          <Checkbox
            my={4}
            disabled={disabled}
            checked={checked(b.id)}
            onChange={(e) => onToggle(b.id, e.currentTarget.checked)}
            aria-label={`${label}: ${b.id}`}
            data-block={b.id}
            label={
              <Text size="sm" span>
                {b.id === "_preamble"
                  ? "(text before the first heading)"
                  : b.heading === ""
                    ? "(untitled)"
                    : b.heading}{" "}
                <Text size="xs" c="dimmed" span>
                  L{b.startLine}-{b.endLine}
                </Text>
              </Text>
            }
          />
          {b.children.length === 0 ? null : render(b.children, depth + 1)}
        </li>
      ))}
    </Box>
  )
  return blocks.length === 0 ? (
    <Text size="sm" c="dimmed">
      No blocks: the file has no headings (or keys).
    </Text>
  ) : (
    render(blocks, 0)
  )
}

export const BlocksView = ({ id }: { readonly id: string }) => {
  const api = useApi()
  const [file, setFile] = useState<ConfigFile | undefined>(undefined)
  const [conflict, setConflict] = useState<string | undefined>(undefined)
  const [error, setError] = useState<string | undefined>(undefined)
  const [saving, setSaving] = useState(false)
  const [pending, setPending] = useState<Config | undefined>(undefined)
  const [written, setWritten] = useState(0)
  const config = useLoad(async () => {
    // Asked only when it exists: a session without a manifest has nothing to read (and no 404 to log).
    const exists = (await api.files.list({ path: { id } })).some((f) => f.path === CONFIG)
    try {
      if (!exists) throw { tag: "FileNotFound" }
      const read = await api.files.read({ path: { id }, urlParams: { path: CONFIG } })
      const parsed = JSON.parse(read.content) as unknown
      const value: ConfigFile = {
        config:
          typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as Config) : {},
        version: read.version
      }
      setFile(value)
      return value
    } catch (e) {
      if ((e as { tag?: unknown }).tag !== "FileNotFound") throw e
      const value: ConfigFile = { config: {}, version: "" }
      setFile(value)
      return value
    }
  }, [api, id])
  const profile = useLoad(() => api.blocks.profile(), [api])
  const files = useLoad(() => api.files.list({ path: { id } }), [api, id])
  const [path, setPath] = useState("")
  const fileBlocks = useLoad(
    () =>
      path === ""
        ? Promise.resolve([] as ReadonlyArray<BlockNode>)
        : api.blocks.file({ path: { id }, urlParams: { path } }),
    [api, id, path]
  )
  // Compiled with the manifest's query, or a stand-in for the next message when it has none (a
  // request without an input composes nothing).
  const query = typeof file?.config.query === "string" && file.config.query !== "" ? undefined : SAMPLE_INPUT
  const preview = useLoad(async () => {
    const view = readPreview(
      await api.context.preview({ path: { id }, urlParams: query === undefined ? {} : { query } })
    )
    if (Either.isLeft(view)) throw new Error(view.left)
    return view.right
  }, [api, id, written, query])

  const write = async (next: Config) => {
    if (file === undefined) return
    setSaving(true)
    setPending(next)
    setError(undefined)
    try {
      const info = await api.context.putConfig({
        path: { id },
        headers: { "if-match": file.version },
        payload: next
      })
      setFile({ config: next, version: info.version })
      setConflict(undefined)
      setWritten((n) => n + 1)
    } catch (e) {
      const tag = (e as { tag?: unknown }).tag
      if (tag === "VersionConflict" || tag === "FileExists")
        setConflict(
          `${CONFIG} changed since this page read it (another tab, an editor or the agent wrote it), so your change was not written. Reload to see the file as it is now, then tick again.`
        )
      else setError(describeError(e))
    } finally {
      setPending(undefined)
      setSaving(false)
    }
  }
  // The tick shows at once; a write that is refused takes it back.
  const shown = pending ?? file?.config ?? {}

  const candidates = (files.data ?? [])
    .map((f) => f.path)
    .filter(
      (p) =>
        /\.(md|markdown|json)$/i.test(p) &&
        p !== CONFIG &&
        p !== "map.json" &&
        p !== "tasks.json" &&
        p !== "memory.json" &&
        !p.startsWith("tool-results/") &&
        !p.endsWith(".blocks.json")
    )
  const locked = saving || conflict !== undefined
  return (
    <Stack>
      <Title order={2}>Blocks of {id}</Title>
      <Text size="sm" c="dimmed">
        Tick the blocks the session's requests carry: profile blocks go to profileBlocks, a file's blocks to
        references in {CONFIG}. A block includes its sub-blocks.
      </Text>
      {conflict === undefined ? null : (
        <Alert color="orange" title="Not written: the file changed" role="alert" data-testid="conflict">
          <Stack gap="xs">
            <Text size="sm">{conflict}</Text>
            <Group>
              <Button
                size="xs"
                onClick={() => {
                  setConflict(undefined)
                  config.reload()
                  setWritten((n) => n + 1)
                }}
              >
                Reload {CONFIG}
              </Button>
            </Group>
          </Stack>
        </Alert>
      )}
      {error === undefined ? null : (
        <Alert color="red" title="Not written" role="alert">
          {error}
        </Alert>
      )}
      <Grid>
        <Grid.Col span={{ base: 12, md: 7 }}>
          <Stack>
            <Paper withBorder p="md">
              <Title order={3} size="h5" mb="xs">
                Profile (profile.md)
              </Title>
              <Show loaded={config}>
                {() => (
                  <Show loaded={profile}>
                    {(blocks) => (
                      <Tree
                        blocks={blocks}
                        label="Profile block"
                        disabled={locked}
                        checked={(b) => profileBlocksOf(shown).includes(b)}
                        onToggle={(b, on) =>
                          file !== undefined && write(withProfileBlock(file.config, b, on))
                        }
                      />
                    )}
                  </Show>
                )}
              </Show>
            </Paper>
            <Paper withBorder p="md">
              <Title order={3} size="h5" mb="xs">
                A session file
              </Title>
              <NativeSelect
                label="File"
                value={path}
                onChange={(e) => setPath(e.currentTarget.value)}
                data={[
                  { value: "", label: "Choose a Markdown or JSON file" },
                  ...candidates.map((p) => ({ value: p, label: p }))
                ]}
                error={files.error}
              />
              {path === "" ? null : (
                <Box mt="sm">
                  <Show loaded={fileBlocks}>
                    {(blocks) => (
                      <Tree
                        blocks={blocks}
                        label={`Block of ${path}`}
                        disabled={locked}
                        checked={(b) =>
                          referencesOf(shown).some((r) => isBlockRef(r) && r.path === path && r.block === b)
                        }
                        onToggle={(b, on) =>
                          file !== undefined && write(withReference(file.config, path, b, on))
                        }
                      />
                    )}
                  </Show>
                </Box>
              )}
            </Paper>
          </Stack>
        </Grid.Col>
        <Grid.Col span={{ base: 12, md: 5 }}>
          <Paper withBorder p="md" aria-live="polite" data-testid="live-preview">
            <Title order={3} size="h5" mb="xs">
              Next request
            </Title>
            <Text size="xs" c="dimmed" mb="xs">
              {query === undefined
                ? "With the manifest's query as the input."
                : `With "${SAMPLE_INPUT}" as the input: the manifest has no query.`}
            </Text>
            <Show loaded={preview}>
              {(view) => (
                <Stack gap="xs">
                  <BudgetBar view={view} />
                  <LayerTable view={view} />
                </Stack>
              )}
            </Show>
          </Paper>
        </Grid.Col>
      </Grid>
    </Stack>
  )
}
