/**
 * Chat: the session's conversation as stored, and a new turn streamed as it happens: its text as
 * it arrives, tool calls and their results (in full as the tool returned them, and as history
 * stores them once the turn is recorded), compaction before the turn with its progress, errors.
 * A failed turn can be sent again with the same idempotency key: the gateway resumes it and records
 * the input once. `@file` and `[file:12:30]` references are offered as you type.
 */
import type { BlockNode } from "@ctxo/api/Api"
import { type ChatEvent, type ChatTurnState, chat, newIdempotencyKey } from "@ctxo/client/Chat"
import { describeError } from "@ctxo/client/Client"
import { Alert, Badge, Button, Group, Loader, Paper, Stack, Text, Textarea, Title } from "@mantine/core"
import { type KeyboardEvent, useEffect, useLayoutEffect, useMemo, useRef, useState } from "react"
import { useApi, useConnection } from "../connection.tsx"
import { ModelSelect } from "../models.tsx"
import { accept, type Suggestion, suggestionsFor, type Token, tokenAt } from "../references.ts"
import { ErrorAlert, Show, StateBadge, useLoad } from "../ui.tsx"
import { Parts } from "./Parts.tsx"

type FullResult = { readonly status?: unknown; readonly data?: unknown; readonly error?: unknown }

interface Sent {
  readonly message: string
  readonly key: string
  readonly model: string
}

const Compaction = ({ state }: { readonly state: ChatTurnState }) => {
  const c = state.compaction
  if (c === undefined) return null
  const span = (turns: ReadonlyArray<number>) => (turns.length === 0 ? "none" : turns.join(", "))
  return (
    <Alert
      color={c.status === "fell-back" ? "orange" : "blue"}
      title="Compaction"
      data-testid="compaction"
      role="status"
    >
      {c.status === "running" ? (
        <Group gap="xs">
          <Loader size="xs" />
          <Text size="sm">
            Summarizing turns {span(c.archivedTurns)}; keeping turns {span(c.keptTurns)}…
          </Text>
        </Group>
      ) : c.status === "finished" ? (
        <Text size="sm">
          Compacted: {c.archivedMessages} messages of turns {span(c.archivedTurns)} archived into summary{" "}
          {c.summaryId ?? "(none)"}; turns {span(c.keptTurns)} kept.
        </Text>
      ) : (
        <Text size="sm">{c.message}</Text>
      )}
    </Alert>
  )
}

/** How the last turn streamed: its deltas, usage, and whether the parts made here are the gateway's. */
const StreamStats = ({ state }: { readonly state: ChatTurnState }) => (
  <Text size="xs" c="dimmed" data-testid="stream-stats" role="status">
    {state.turn === undefined ? "Sending…" : `Turn ${state.turn}: `}
    {state.deltas} text deltas
    {state.usage === undefined
      ? ""
      : ` · ${state.usage.inputTokens} tokens in, ${state.usage.outputTokens} out`}
    {state.done === undefined ? "" : " · done"}
    {state.partsMatchServer === undefined
      ? ""
      : state.partsMatchServer
        ? " · parts as the gateway's"
        : " · parts differ from the gateway's"}
  </Text>
)

/** The turn being streamed: what was sent, then what the events made so far. */
const LiveTurn = ({
  id,
  sent,
  state,
  fullResults
}: {
  readonly id: string
  readonly sent: Sent
  readonly state: ChatTurnState
  readonly fullResults: ReadonlyMap<string, FullResult>
}) => (
  <Stack gap="xs" data-testid="live-turn">
    <Paper withBorder p="xs" bg="var(--mantine-color-indigo-0)">
      <Text size="xs" fw={600}>
        you{state.turn === undefined ? "" : ` · turn ${state.turn}`}
        {state.resumed ? " · resumed" : ""}
      </Text>
      <Text size="sm" style={{ whiteSpace: "pre-wrap" }}>
        {sent.message}
      </Text>
    </Paper>
    <Compaction state={state} />
    <Paper withBorder p="xs">
      <Group gap="xs" mb={4}>
        <Text size="xs" fw={600}>
          assistant
        </Text>
        {state.done === undefined && state.error === undefined ? (
          <Loader size="xs" aria-label="Streaming" />
        ) : null}
      </Group>
      <div data-testid="live-parts" aria-live="polite">
        <Parts sessionId={id} parts={state.parts} fullResults={fullResults} />
      </div>
      {state.done !== undefined && state.parts.length === 0 ? (
        <Text size="sm" style={{ whiteSpace: "pre-wrap" }}>
          {state.done.text}
        </Text>
      ) : null}
    </Paper>
  </Stack>
)

const Composer = ({
  id,
  disabled,
  onSend
}: {
  readonly id: string
  readonly disabled: boolean
  readonly onSend: (message: string) => void
}) => {
  const api = useApi()
  const files = useLoad(() => api.files.list({ path: { id } }), [api, id])
  const [text, setText] = useState("")
  const [caret, setCaret] = useState(0)
  const [active, setActive] = useState(0)
  const [closedAt, setClosedAt] = useState<number | undefined>(undefined)
  const [blocks, setBlocks] = useState<ReadonlyMap<string, ReadonlyArray<BlockNode>>>(new Map())
  const area = useRef<HTMLTextAreaElement>(null)
  // Where the caret goes once a taken suggestion is in the box: placed as soon as React has put the
  // new text there, before the next key is handled (on the next frame, it came after the keys typed
  // meanwhile on a loaded machine, and moved them: "in one line" became "ine in one l").
  const caretAfter = useRef<number | undefined>(undefined)
  useLayoutEffect(() => {
    const at = caretAfter.current
    if (at === undefined) return
    caretAfter.current = undefined
    area.current?.focus()
    area.current?.setSelectionRange(at, at)
  })
  const paths = useMemo(
    () =>
      (files.data ?? [])
        .map((f) => f.path)
        .filter((p) => !p.startsWith("tool-results/") && p !== "messages.json"),
    [files.data]
  )
  const token: Token | undefined = tokenAt(text, caret)
  const open = token !== undefined && token.start !== closedAt
  const found = open
    ? suggestionsFor(token, paths, (p) => blocks.get(p))
    : { suggestions: [] as ReadonlyArray<Suggestion> }
  const needs = "needsBlocks" in found ? found.needsBlocks : undefined
  useEffect(() => {
    if (needs === undefined || blocks.has(needs)) return
    api.blocks.file({ path: { id }, urlParams: { path: needs } }).then(
      (b) => setBlocks((m) => new Map(m).set(needs, b)),
      () => setBlocks((m) => new Map(m).set(needs, []))
    )
  }, [needs, api, id, blocks])
  const suggestions = found.suggestions
  const shown = open && suggestions.length > 0
  const choose = (s: Suggestion) => {
    if (token === undefined) return
    const next = accept(text, token, caret, s)
    setText(next.text)
    setCaret(next.caret)
    setActive(0)
    caretAfter.current = next.caret
  }
  const send = () => {
    if (text.trim() === "" || disabled) return
    onSend(text)
    setText("")
    setCaret(0)
  }
  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (shown) {
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        e.preventDefault()
        setActive((a) => (a + (e.key === "ArrowDown" ? 1 : suggestions.length - 1)) % suggestions.length)
        return
      }
      if (e.key === "Enter" || e.key === "Tab") {
        e.preventDefault()
        choose(suggestions[Math.min(active, suggestions.length - 1)]!)
        return
      }
      if (e.key === "Escape") {
        e.preventDefault()
        setClosedAt(token?.start)
        return
      }
    }
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault()
      send()
    }
  }
  const listId = `ref-suggestions-${id}`
  return (
    <form
      aria-label="Send a message"
      onSubmit={(e) => {
        e.preventDefault()
        send()
      }}
    >
      <Stack gap={4}>
        <Textarea
          ref={area}
          label="Message"
          description="Ctrl+Enter sends. @file mentions a file; [file:12:30] or [file#Heading] puts its lines or block in the message. Suggestions: arrows, Enter or Tab to take, Escape to close."
          autosize
          minRows={2}
          maxRows={10}
          value={text}
          onChange={(e) => {
            setText(e.currentTarget.value)
            setCaret(e.currentTarget.selectionStart)
            setActive(0)
          }}
          onSelect={(e) => setCaret(e.currentTarget.selectionStart)}
          onKeyDown={onKeyDown}
          role="combobox"
          aria-autocomplete="list"
          aria-expanded={shown}
          aria-controls={listId}
          aria-activedescendant={shown ? `${listId}-${Math.min(active, suggestions.length - 1)}` : undefined}
          disabled={disabled}
        />
        {shown ? (
          <Paper withBorder shadow="sm" p={4}>
            <div
              id={listId}
              role="listbox"
              aria-label="Suggestions"
              style={{ maxHeight: 220, overflow: "auto" }}
            >
              {suggestions.map((s, i) => (
                <div
                  key={s.label}
                  id={`${listId}-${i}`}
                  role="option"
                  tabIndex={-1}
                  aria-selected={i === active}
                  onMouseDown={(e) => {
                    e.preventDefault()
                    choose(s)
                  }}
                  style={{
                    padding: "4px 8px",
                    cursor: "pointer",
                    background: i === active ? "var(--mantine-color-indigo-1)" : undefined
                  }}
                >
                  <Text size="sm" span>
                    {s.label}
                  </Text>{" "}
                  <Text size="xs" c="dimmed" span>
                    {s.detail}
                  </Text>
                </div>
              ))}
            </div>
          </Paper>
        ) : null}
        <Group justify="flex-end">
          <Button type="submit" disabled={disabled || text.trim() === ""}>
            Send
          </Button>
        </Group>
      </Stack>
    </form>
  )
}

export const ChatView = ({ id }: { readonly id: string }) => {
  const api = useApi()
  const { connection } = useConnection()
  const record = useLoad(() => api.sessions.get({ path: { id } }), [api, id])
  const history = useLoad(() => api.history.list({ path: { id } }), [api, id])
  const [model, setModel] = useState("")
  const [sent, setSent] = useState<Sent | undefined>(undefined)
  const [state, setState] = useState<ChatTurnState | undefined>(undefined)
  const [failure, setFailure] = useState<string | undefined>(undefined)
  const [streaming, setStreaming] = useState(false)
  const [fullResults, setFullResults] = useState<ReadonlyMap<string, FullResult>>(new Map())
  const abort = useRef<AbortController | undefined>(undefined)
  useEffect(() => () => abort.current?.abort(), [])

  const run = async (turn: Sent) => {
    setSent(turn)
    setState({ resumed: false, parts: [], deltas: 0 })
    setFailure(undefined)
    setStreaming(true)
    const controller = new AbortController()
    abort.current = controller
    try {
      const last = await chat(
        connection,
        id,
        {
          message: turn.message,
          idempotencyKey: turn.key,
          ...(turn.model === "" ? {} : { model: turn.model })
        },
        {
          signal: controller.signal,
          onEvent: (event: ChatEvent, next) => {
            if (event.type === "tool-result")
              setFullResults((m) => new Map(m).set(event.id, event.result as FullResult))
            setState(next)
          }
        }
      )
      setState(last)
      if (last.error !== undefined) setFailure(`${last.error.tag}: ${last.error.message}`)
    } catch (e) {
      if (!controller.signal.aborted) setFailure(describeError(e))
    } finally {
      setStreaming(false)
      history.reload()
      record.reload()
    }
  }

  const turns = history.data?.turns ?? []
  // Once the streamed turn is in the history, the history shows it (with results as stored).
  const recorded = state?.done !== undefined && turns.some((t) => t.turn === state.done?.turn && t.finished)
  return (
    <Stack>
      <Group justify="space-between" wrap="wrap">
        <Group gap="xs">
          <Title order={2}>Chat in {id}</Title>
          {record.data === undefined ? null : <StateBadge state={record.data.state} />}
        </Group>
        <ModelSelect value={model} onChange={setModel} />
      </Group>
      {record.data !== undefined && record.data.state !== "active" ? (
        <Alert color="yellow" role="status">
          This session is {record.data.state}: it takes no turns
          {record.data.state === "paused" ? " until it is resumed (Overview)" : ""}.
        </Alert>
      ) : null}
      <Show loaded={history}>
        {(h) => (
          <Stack gap="sm" data-testid="transcript">
            {h.summaries.map((s) => (
              <Paper key={s.id} withBorder p="xs" bg="var(--mantine-color-gray-0)">
                <Text size="xs" c="dimmed">
                  Turns {s.turns.join(", ")} were compacted into summary {s.id} (see History).
                </Text>
              </Paper>
            ))}
            {h.turns
              .filter((t) => t.archivedBy === undefined)
              .filter((t) => !(sent !== undefined && !recorded && state?.turn === t.turn))
              .map((t) => (
                <Stack key={t.turn} gap={6} data-turn={t.turn}>
                  {t.messages.map((m) => (
                    <Paper
                      key={m.id}
                      withBorder
                      p="xs"
                      {...(m.role === "user" ? { bg: "var(--mantine-color-indigo-0)" } : {})}
                    >
                      <Group gap="xs">
                        <Text size="xs" fw={600}>
                          {m.role === "user" ? "you" : m.role === "tool" ? "tool" : "assistant"} · turn{" "}
                          {t.turn}
                        </Text>
                        {m.pinned ? <Badge size="xs">pinned</Badge> : null}
                        {m.dismissed === undefined ? null : (
                          <Badge size="xs" color="orange">
                            {m.dismissed.by === "model" ? "dismissed" : "excluded"}
                          </Badge>
                        )}
                      </Group>
                      <Parts sessionId={id} parts={m.parts} fullResults={fullResults} />
                    </Paper>
                  ))}
                </Stack>
              ))}
          </Stack>
        )}
      </Show>
      {sent !== undefined && state !== undefined && !recorded ? (
        <LiveTurn id={id} sent={sent} state={state} fullResults={fullResults} />
      ) : null}
      {state?.compaction !== undefined && recorded ? <Compaction state={state} /> : null}
      {state === undefined ? null : <StreamStats state={state} />}
      {failure === undefined || sent === undefined ? null : (
        <Alert color="red" title="The turn did not finish" role="alert" data-testid="chat-error">
          <Stack gap="xs">
            <Text size="sm" style={{ overflowWrap: "anywhere" }}>
              {failure}
            </Text>
            <Group>
              <Button size="xs" onClick={() => run(sent)} disabled={streaming}>
                Retry with the same idempotency key
              </Button>
              <Text size="xs" c="dimmed">
                key {sent.key}
              </Text>
            </Group>
          </Stack>
        </Alert>
      )}
      <ErrorAlert error={history.error} />
      <Composer
        id={id}
        disabled={streaming || record.data?.state === "ended"}
        onSend={(message) => run({ message, key: newIdempotencyKey(), model })}
      />
    </Stack>
  )
}
