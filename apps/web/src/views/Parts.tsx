/**
 * A message's parts for people: text, a tool call with its arguments, a tool result with its
 * status, data and error. A result is shown as stored (history keeps it compressed) and, when the
 * page has it or the store kept it apart (`tool-results/<call>.json`), in full.
 */
import type { Part } from "@ctxo/history/Message"
import { Badge, Button, Group, Paper, SegmentedControl, Stack, Text } from "@mantine/core"
import { useState } from "react"
import { useApi } from "../connection.tsx"
import { ErrorAlert, useAction } from "../ui.tsx"

const show = (value: unknown) => (typeof value === "string" ? value : JSON.stringify(value, null, 2))

export const ToolCall = ({ name, input }: { readonly name: string; readonly input: unknown }) => (
  <Paper withBorder p="xs" bg="var(--mantine-color-gray-0)" data-testid="tool-call">
    <Text size="xs" fw={600}>
      Tool call: {name}
    </Text>
    <pre className="pre">{show(input)}</pre>
  </Paper>
)

type ToolResult = Extract<Part, { _tag: "tool-result" }>

/**
 * A tool result: `stored` as history keeps it, `full` as the tool returned it (streamed in this
 * page's turn) or loaded from the file the store kept it in.
 */
export const ToolResultView = ({
  sessionId,
  stored,
  full
}: {
  readonly sessionId: string
  readonly stored?: ToolResult
  readonly full?: { readonly status?: unknown; readonly data?: unknown; readonly error?: unknown } | undefined
}) => {
  const api = useApi()
  const action = useAction()
  const [loaded, setLoaded] = useState<unknown>(undefined)
  const whole = full ?? (loaded as typeof full)
  const [mode, setMode] = useState<"stored" | "full">(stored === undefined ? "full" : "stored")
  const status = stored?.status ?? (whole?.status === "error" ? "error" : "success")
  const name = stored?.name ?? "tool"
  const body =
    mode === "stored" && stored !== undefined
      ? { data: stored.data, error: stored.error }
      : { data: whole?.data, error: whole?.error }
  return (
    <Paper withBorder p="xs" data-testid="tool-result">
      <Stack gap={4}>
        <Group justify="space-between" wrap="wrap" gap="xs">
          <Group gap="xs">
            <Text size="xs" fw={600}>
              Tool result: {name}
            </Text>
            <Badge size="xs" color={status === "error" ? "red" : "green"} variant="light">
              {status}
            </Badge>
          </Group>
          <Group gap="xs">
            {stored?.full !== undefined && whole === undefined ? (
              <Button
                size="compact-xs"
                variant="default"
                loading={action.busy}
                onClick={async () => {
                  const file = await action.run(() =>
                    api.files.read({ path: { id: sessionId }, urlParams: { path: stored.full! } })
                  )
                  if (file === undefined) return
                  try {
                    setLoaded(JSON.parse(file.content))
                    setMode("full")
                  } catch {
                    setLoaded({ data: file.content })
                  }
                }}
              >
                Load the full result
              </Button>
            ) : null}
            {stored !== undefined && whole !== undefined ? (
              <SegmentedControl
                size="xs"
                aria-label={`${name} result: as stored or in full`}
                value={mode}
                onChange={(v) => setMode(v as "stored" | "full")}
                data={[
                  { value: "stored", label: "As stored" },
                  { value: "full", label: "Full" }
                ]}
              />
            ) : null}
          </Group>
        </Group>
        {stored === undefined && whole !== undefined ? (
          <Text size="xs" c="dimmed">
            In full, as the tool returned it; history keeps it compressed.
          </Text>
        ) : null}
        {stored !== undefined && mode === "stored" && stored.full !== undefined ? (
          <Text size="xs" c="dimmed">
            Compressed; the whole result is kept in {stored.full}.
          </Text>
        ) : null}
        {body.data === undefined ? null : <pre className="pre scroll-box">{show(body.data)}</pre>}
        {body.error === undefined ? null : (
          <Text size="xs" c="red">
            {show(body.error)}
          </Text>
        )}
        <ErrorAlert error={action.error} />
      </Stack>
    </Paper>
  )
}

/** Every part of a message, in order; a result finds its full form in `fullResults` by call id. */
export const Parts = ({
  sessionId,
  parts,
  fullResults
}: {
  readonly sessionId: string
  readonly parts: ReadonlyArray<Part>
  readonly fullResults?: ReadonlyMap<
    string,
    { readonly status?: unknown; readonly data?: unknown; readonly error?: unknown }
  >
}) => (
  <Stack gap={6}>
    {parts.map((p, i) =>
      p._tag === "text" ? (
        // biome-ignore lint/suspicious/noArrayIndexKey: a message's parts have no ids; their order is fixed
        <Text key={i} size="sm" style={{ whiteSpace: "pre-wrap", overflowWrap: "anywhere" }}>
          {p.text}
        </Text>
      ) : p._tag === "tool-call" ? (
        <ToolCall key={`call-${p.callId}`} name={p.name} input={p.input} />
      ) : (
        <ToolResultView
          key={`result-${p.callId}`}
          sessionId={sessionId}
          stored={p}
          full={fullResults?.get(p.callId)}
        />
      )
    )}
  </Stack>
)
