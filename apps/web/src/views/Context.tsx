/**
 * Context: what the session's next turn would send, for a chosen model and format. The layers in
 * order with their tokens as a bar against the window and the output reserve, the static prefix
 * and its hash, every unit cut or dropped with its reason, the sources' ledger, the request as the
 * model gets it, and a line diff against the request the previous turn sent.
 */
import type { Preview } from "@ctxo/api/Api"
import { type PreviewView, readPreview } from "@ctxo/client/Preview"
import {
  Badge,
  Button,
  Group,
  Paper,
  Progress,
  SegmentedControl,
  Stack,
  Table,
  Text,
  TextInput,
  Title,
  Tooltip
} from "@mantine/core"
import { diffLines } from "diff"
import { Either } from "effect"
import { useMemo, useState } from "react"
import { useApi } from "../connection.tsx"
import { type Format, FormatControl, ModelSelect } from "../models.tsx"
import { ErrorAlert, Show, tokens, useLoad } from "../ui.tsx"

const COLORS = [
  "indigo",
  "teal",
  "grape",
  "orange",
  "cyan",
  "pink",
  "lime",
  "violet",
  "yellow",
  "blue",
  "red",
  "green"
]

const percent = (part: number, whole: number) => (whole <= 0 ? 0 : (100 * part) / whole)

/** The layers as a bar over the whole window: each layer, the room left, what is held back, the output reserve. */
export const BudgetBar = ({ view }: { readonly view: PreviewView }) => {
  const { report, preview } = view
  const window = report.window.tokens
  const used = preview.layers.reduce((n, l) => n + l.tokens, 0)
  const free = Math.max(0, report.available - used)
  const held = Math.max(0, window - report.outputReserve - report.available)
  const summary = `${tokens(report.total ?? used)} of ${tokens(report.available)} available tokens (window ${tokens(window)}, output reserve ${tokens(report.outputReserve)})`
  return (
    <Stack gap={4}>
      <Text size="sm" data-testid="budget-summary">
        {summary}
      </Text>
      <Progress.Root size={22} aria-label={summary}>
        {preview.layers.map((l, i) => (
          <Tooltip key={l.id} label={`${l.id}: ${tokens(l.tokens)} tokens`}>
            <Progress.Section
              value={percent(l.tokens, window)}
              color={COLORS[i % COLORS.length]!}
              aria-label={`${l.id} ${l.tokens} tokens`}
            />
          </Tooltip>
        ))}
        <Progress.Section
          value={percent(free, window)}
          color="gray.2"
          aria-label={`room left ${free} tokens`}
        />
        {held > 0 ? (
          <Progress.Section
            value={percent(held, window)}
            color="gray.5"
            aria-label={`held back ${held} tokens`}
          />
        ) : null}
        <Tooltip label={`output reserve: ${tokens(report.outputReserve)} tokens`}>
          <Progress.Section
            value={percent(report.outputReserve, window)}
            color="dark.3"
            aria-label={`output reserve ${report.outputReserve} tokens`}
          >
            <Progress.Label>reserve</Progress.Label>
          </Progress.Section>
        </Tooltip>
      </Progress.Root>
      {used === 0 ? null : (
        <>
          <Text size="xs" c="dimmed">
            The request alone, by layer:
          </Text>
          <Progress.Root size={14} aria-label={`the request's ${used} tokens by layer`}>
            {preview.layers.map((l, i) => (
              <Tooltip key={l.id} label={`${l.id}: ${tokens(l.tokens)} tokens`}>
                <Progress.Section
                  value={percent(l.tokens, used)}
                  color={COLORS[i % COLORS.length]!}
                  aria-label={`${l.id} ${l.tokens} tokens`}
                />
              </Tooltip>
            ))}
          </Progress.Root>
        </>
      )}
    </Stack>
  )
}

/** The layers in the order the model reads them, their tokens, and which ones make the static prefix. */
export const LayerTable = ({ view }: { readonly view: PreviewView }) => (
  <Table.ScrollContainer minWidth={320}>
    <Table aria-label="Layers in order" data-testid="layers">
      <Table.Thead>
        <Table.Tr>
          <Table.Th>Layer</Table.Th>
          <Table.Th ta="right">Tokens</Table.Th>
          <Table.Th ta="right">Of the window</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {view.preview.layers.map((l, i) => (
          <Table.Tr key={l.id} data-layer={l.id}>
            <Table.Td>
              <Group gap={6} wrap="nowrap">
                <span
                  aria-hidden
                  style={{
                    width: 10,
                    height: 10,
                    borderRadius: 2,
                    background: `var(--mantine-color-${COLORS[i % COLORS.length]}-filled)`
                  }}
                />
                <Text size="sm">
                  {l.id}
                  {l.messages === undefined ? "" : ` (${l.messages} messages)`}
                </Text>
                {view.staticLayers.includes(l.id) ? (
                  <Badge size="xs" variant="outline">
                    static
                  </Badge>
                ) : null}
              </Group>
            </Table.Td>
            <Table.Td ta="right">{tokens(l.tokens)}</Table.Td>
            <Table.Td ta="right">{percent(l.tokens, view.report.window.tokens).toFixed(2)}%</Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  </Table.ScrollContainer>
)

const Cuts = ({ view }: { readonly view: PreviewView }) =>
  view.cuts.length === 0 ? (
    <Text size="sm" data-testid="cuts">
      Nothing cut: every unit was sent whole.
    </Text>
  ) : (
    <Table.ScrollContainer minWidth={480}>
      <Table aria-label="Cuts" data-testid="cuts">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Unit</Table.Th>
            <Table.Th>Source</Table.Th>
            <Table.Th ta="right">Tokens</Table.Th>
            <Table.Th>What and why</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {view.cuts.map((u) => (
            <Table.Tr key={`${u.source}/${u.id}`}>
              <Table.Td>
                <Text size="xs" style={{ overflowWrap: "anywhere" }}>
                  {u.id}
                  {u.ref === undefined ? "" : ` [${u.ref}]`}
                </Text>
              </Table.Td>
              <Table.Td>{u.source}</Table.Td>
              <Table.Td ta="right">{tokens(u.tokens)}</Table.Td>
              <Table.Td>
                <Text size="xs">
                  {u.status}
                  {u.reason === undefined ? "" : `: ${u.reason}`}
                </Text>
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  )

const Sources = ({ view }: { readonly view: PreviewView }) => (
  <Table.ScrollContainer minWidth={560}>
    <Table aria-label="Sources">
      <Table.Thead>
        <Table.Tr>
          <Table.Th>Source</Table.Th>
          <Table.Th ta="right">Share</Table.Th>
          <Table.Th ta="right">Cap</Table.Th>
          <Table.Th ta="right">Asked</Table.Th>
          <Table.Th ta="right">Granted</Table.Th>
          <Table.Th ta="right">Used</Table.Th>
          <Table.Th>Cut</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {view.report.sources.map((s) => (
          <Table.Tr key={s.id}>
            <Table.Td>
              {s.id}
              {s.required ? " (required)" : ""}
            </Table.Td>
            <Table.Td ta="right">{(s.share * 100).toFixed(0)}%</Table.Td>
            <Table.Td ta="right">{tokens(s.cap)}</Table.Td>
            <Table.Td ta="right">{tokens(s.ask)}</Table.Td>
            <Table.Td ta="right">{tokens(s.grant)}</Table.Td>
            <Table.Td ta="right">{tokens(s.used)}</Table.Td>
            <Table.Td>
              <Text size="xs">
                {s.cut === undefined
                  ? ""
                  : `${s.cut.units} units, ${tokens(s.cut.tokens)} tokens dropped: ${(s.why ?? []).join("; ")}`}
              </Text>
            </Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  </Table.ScrollContainer>
)

type DiffLine = { readonly kind: "add" | "del" | "same"; readonly text: string }

/** The lines of `after` against `before`; runs of unchanged lines beyond `context` folded when asked. */
export const lineDiff = (before: string, after: string): ReadonlyArray<DiffLine> =>
  diffLines(before, after).flatMap((change) =>
    change.value
      .replace(/\n$/, "")
      .split("\n")
      .map((text): DiffLine => ({ kind: change.added ? "add" : change.removed ? "del" : "same", text }))
  )

const fold = (lines: ReadonlyArray<DiffLine>, context: number) => {
  const out: Array<DiffLine | { readonly kind: "fold"; readonly count: number }> = []
  const near = lines.map((_, i) =>
    lines.slice(Math.max(0, i - context), i + context + 1).some((l) => l.kind !== "same")
  )
  let folded = 0
  for (const [i, line] of lines.entries()) {
    if (line.kind === "same" && !near[i]) {
      folded++
      continue
    }
    if (folded > 0) out.push({ kind: "fold", count: folded })
    folded = 0
    out.push(line)
  }
  if (folded > 0) out.push({ kind: "fold", count: folded })
  return out
}

const Diff = ({ before, after }: { readonly before: string; readonly after: string }) => {
  const [onlyChanges, setOnlyChanges] = useState(true)
  const lines = useMemo(() => lineDiff(before, after), [before, after])
  const added = lines.filter((l) => l.kind === "add").length
  const removed = lines.filter((l) => l.kind === "del").length
  const shown = onlyChanges ? fold(lines, 3) : lines
  return (
    <Stack gap={4}>
      <Group justify="space-between">
        <Text size="sm" data-testid="diff-summary">
          {added === 0 && removed === 0
            ? "The same request as the previous turn's."
            : `${added} lines added, ${removed} removed since the previous turn's request`}
        </Text>
        <SegmentedControl
          size="xs"
          aria-label="Diff lines"
          value={onlyChanges ? "changes" : "all"}
          onChange={(v) => setOnlyChanges(v === "changes")}
          data={[
            { value: "changes", label: "Changes" },
            { value: "all", label: "All lines" }
          ]}
        />
      </Group>
      <pre className="pre scroll-box" data-testid="diff">
        {shown.map((l, i) =>
          l.kind === "fold" ? (
            // biome-ignore lint/suspicious/noArrayIndexKey: lines have no identity beyond their place
            <span key={i} style={{ display: "block", color: "var(--mantine-color-dimmed)" }}>
              … {l.count} unchanged lines
            </span>
          ) : (
            <span
              // biome-ignore lint/suspicious/noArrayIndexKey: lines have no identity beyond their place
              key={i}
              className={l.kind === "add" ? "diff-add" : l.kind === "del" ? "diff-del" : undefined}
            >
              {l.kind === "add" ? "+ " : l.kind === "del" ? "- " : "  "}
              {l.text}
              {"\n"}
            </span>
          )
        )}
      </pre>
    </Stack>
  )
}

const read = (preview: Preview): PreviewView => {
  const view = readPreview(preview)
  if (Either.isLeft(view)) throw new Error(view.left)
  return view.right
}

export const ContextView = ({ id }: { readonly id: string }) => {
  const api = useApi()
  const [model, setModel] = useState("")
  const [format, setFormat] = useState<Format>("openai")
  const [draft, setDraft] = useState("")
  const [query, setQuery] = useState("")
  const urlParams = { format, ...(model === "" ? {} : { model }) }
  const current = useLoad(
    async () =>
      read(
        await api.context.preview({
          path: { id },
          urlParams: { ...urlParams, ...(query === "" ? {} : { query }) }
        })
      ),
    [api, id, model, format, query]
  )
  const previous = useLoad(async () => {
    // Asked only when there was a turn (a session without one has no previous request, and no 404 to log).
    const history = await api.history.list({ path: { id } })
    if (history.turns.length === 0) return null
    return read(await api.context.previous({ path: { id }, urlParams }))
  }, [api, id, model, format])
  return (
    <Stack>
      <Title order={2}>Context of {id}</Title>
      <Paper withBorder p="sm">
        <form
          onSubmit={(e) => {
            e.preventDefault()
            setQuery(draft)
          }}
        >
          <Group align="flex-end" wrap="wrap">
            <ModelSelect value={model} onChange={setModel} />
            <FormatControl value={format} onChange={setFormat} />
            <TextInput
              label="Next input"
              description="Empty: the manifest's query"
              value={draft}
              onChange={(e) => setDraft(e.currentTarget.value)}
              style={{ flex: 1 }}
              miw={200}
            />
            <Button type="submit" variant="default">
              Preview
            </Button>
            <Button
              variant="subtle"
              onClick={() => {
                current.reload()
                previous.reload()
              }}
            >
              Refresh
            </Button>
          </Group>
        </form>
      </Paper>
      <Show loaded={current}>
        {(view) => (
          <Stack>
            <Text fw={600} data-testid="context-model">
              {view.report.model} · {view.preview.format} · {view.report.tokenizer.name} (
              {view.report.tokenizer.method})
            </Text>
            <BudgetBar view={view} />
            {view.preview.warnings.map((w) => (
              <Text key={w} size="sm" c="orange">
                {w}
              </Text>
            ))}
            {view.preview.layers.length === 0 ? (
              <Text size="sm">
                The request is empty: the manifest has no query. Type the next input above to see one.
              </Text>
            ) : (
              <LayerTable view={view} />
            )}
            <Paper withBorder p="sm" data-testid="prefix">
              <Text size="sm">
                Static prefix: {view.staticLayers.length === 0 ? "none" : view.staticLayers.join(", ")} — hash{" "}
                <code>{view.prefix.hash}</code>, {tokens(view.prefix.tokens)} tokens. A provider's prompt
                cache can reuse it while it stays the same.
              </Text>
            </Paper>
            <Title order={3} size="h4">
              Cuts
            </Title>
            <Cuts view={view} />
            <Title order={3} size="h4">
              Sources
            </Title>
            <Sources view={view} />
            <Title order={3} size="h4">
              The request as the model gets it
            </Title>
            <pre className="pre scroll-box" data-testid="request">
              {view.requestText}
            </pre>
            <Title order={3} size="h4">
              Against the previous turn's request
            </Title>
            {previous.error !== undefined ? (
              <ErrorAlert error={previous.error} onRetry={previous.reload} />
            ) : previous.data === undefined ? (
              <Text size="sm">Loading the previous turn's request…</Text>
            ) : previous.data === null ? (
              <Text size="sm" data-testid="diff-summary">
                This session has no turn yet: nothing to compare with.
              </Text>
            ) : (
              <Diff before={previous.data.requestText} after={view.requestText} />
            )}
          </Stack>
        )}
      </Show>
    </Stack>
  )
}
