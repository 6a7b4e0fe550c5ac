/**
 * History: the session's turns as stored, each message with what the model sees of it. Pin a turn
 * (compaction keeps it, every request shows it), exclude a message with a reason or summary (the
 * model sees a placeholder instead), restore it (also a message the model dismissed with
 * `dismiss_memory`); summaries with the turns they archived.
 */
import type { HistoryMessage, HistoryTurn } from "@ctxo/api/HistoryApi"
import { Badge, Button, Group, Paper, Spoiler, Stack, Text, TextInput, Title } from "@mantine/core"
import { useState } from "react"
import { useApi } from "../connection.tsx"
import { ErrorAlert, formatTime, Show, useAction, useLoad } from "../ui.tsx"
import { Parts } from "./Parts.tsx"

const Message = ({
  sessionId,
  message,
  onChange
}: {
  readonly sessionId: string
  readonly message: HistoryMessage
  readonly onChange: () => void
}) => {
  const api = useApi()
  const action = useAction()
  const [excluding, setExcluding] = useState(false)
  const [reason, setReason] = useState("")
  const isResult = message.parts.some((p) => p._tag === "tool-result")
  const path = { path: { id: sessionId, messageId: message.id } }
  return (
    <Paper
      withBorder
      p="xs"
      data-message={message.id}
      {...(message.dismissed === undefined ? {} : { bg: "var(--mantine-color-gray-0)" })}
    >
      <Stack gap={6}>
        <Group justify="space-between" wrap="wrap" gap="xs">
          <Group gap="xs">
            <Text size="xs" fw={600}>
              {message.role}
              {message.kind === undefined ? "" : ` · ${message.kind}`}
              {message.step === undefined ? "" : ` · step ${message.step}`}
            </Text>
            <Text size="xs" c="dimmed">
              {message.id}
            </Text>
            {message.pinned ? <Badge size="xs">pinned</Badge> : null}
            {message.archivedBy === undefined ? null : (
              <Badge size="xs" color="gray">
                archived into {message.archivedBy}
              </Badge>
            )}
            {message.dismissed === undefined ? null : (
              <Badge size="xs" color="orange">
                {message.dismissed.by === "model" ? "dismissed by the model" : "excluded"}
              </Badge>
            )}
          </Group>
          {message.archivedBy !== undefined ? null : message.dismissed !== undefined ? (
            <Button
              size="compact-xs"
              variant="default"
              loading={action.busy}
              onClick={async () => {
                if ((await action.run(() => api.history.restore(path))) !== undefined) onChange()
              }}
            >
              Restore {message.id}
            </Button>
          ) : message.pinned ? null : excluding ? null : (
            <Button size="compact-xs" variant="subtle" onClick={() => setExcluding(true)}>
              {isResult ? `Exclude or dismiss ${message.id}` : `Exclude ${message.id}`}
            </Button>
          )}
        </Group>
        {message.placeholder === undefined ? null : (
          <Text size="xs" data-testid="placeholder">
            The model sees: <code>{message.placeholder}</code>
          </Text>
        )}
        {excluding ? (
          <form
            onSubmit={async (e) => {
              e.preventDefault()
              const done = await action.run(() =>
                api.history.exclude({
                  ...path,
                  payload: reason.trim() === "" ? {} : { reason: reason.trim() }
                })
              )
              if (done !== undefined) {
                setExcluding(false)
                setReason("")
                onChange()
              }
            }}
          >
            <Group align="flex-end" wrap="wrap">
              <TextInput
                label={
                  isResult
                    ? "Summary or reason (the placeholder says it)"
                    : "Reason (the placeholder says it)"
                }
                value={reason}
                onChange={(e) => setReason(e.currentTarget.value)}
                data-autofocus
                autoFocus
                style={{ flex: 1 }}
                miw={200}
              />
              <Button type="submit" size="xs" loading={action.busy}>
                Exclude
              </Button>
              <Button size="xs" variant="default" onClick={() => setExcluding(false)}>
                Cancel
              </Button>
            </Group>
          </form>
        ) : null}
        <Parts sessionId={sessionId} parts={message.parts} />
        {message.references === undefined ? null : (
          <Text size="xs" c="dimmed">
            references:{" "}
            {message.references
              .map((r) =>
                typeof r === "string"
                  ? r
                  : "block" in r
                    ? `${r.path}#${r.block}`
                    : `${r.path}:${r.startLine}:${r.endLine}`
              )
              .join(", ")}
          </Text>
        )}
        <ErrorAlert error={action.error} />
      </Stack>
    </Paper>
  )
}

const Turn = ({
  sessionId,
  turn,
  onChange
}: {
  readonly sessionId: string
  readonly turn: HistoryTurn
  readonly onChange: () => void
}) => {
  const api = useApi()
  const action = useAction()
  return (
    <Paper withBorder p="sm" data-turn={turn.turn} component="section" aria-label={`Turn ${turn.turn}`}>
      <Stack gap="xs">
        <Group justify="space-between" wrap="wrap">
          <Group gap="xs">
            <Title order={3} size="h5">
              Turn {turn.turn}
            </Title>
            {turn.finished ? null : <Badge color="yellow">unfinished</Badge>}
            {turn.pinned ? <Badge data-testid="turn-pinned">pinned</Badge> : null}
            {turn.archivedBy === undefined ? null : (
              <Badge color="gray">archived into {turn.archivedBy}</Badge>
            )}
            <Text size="xs" c="dimmed">
              {formatTime(turn.messages[0]?.createdAt)}
            </Text>
          </Group>
          {turn.archivedBy === undefined ? (
            <Button
              size="xs"
              variant={turn.pinned ? "light" : "default"}
              loading={action.busy}
              onClick={async () => {
                const done = await action.run(() =>
                  api.history.pinTurn({
                    path: { id: sessionId, turn: turn.turn },
                    payload: { pinned: !turn.pinned }
                  })
                )
                if (done !== undefined) onChange()
              }}
            >
              {turn.pinned ? `Unpin turn ${turn.turn}` : `Pin turn ${turn.turn}`}
            </Button>
          ) : null}
        </Group>
        <ErrorAlert error={action.error} />
        {turn.messages.map((m) => (
          <Message key={m.id} sessionId={sessionId} message={m} onChange={onChange} />
        ))}
      </Stack>
    </Paper>
  )
}

export const HistoryView = ({ id }: { readonly id: string }) => {
  const api = useApi()
  const history = useLoad(() => api.history.list({ path: { id } }), [api, id])
  return (
    <Stack>
      <Title order={2}>History of {id}</Title>
      <Show loaded={history}>
        {(h) => (
          <Stack>
            <Title order={3} size="h4">
              Summaries
            </Title>
            {h.summaries.length === 0 ? (
              <Text size="sm" c="dimmed" data-testid="summaries">
                No compaction yet.
              </Text>
            ) : (
              h.summaries.map((s) => (
                <Paper key={s.id} withBorder p="sm" data-testid="summary">
                  <Text size="sm" fw={600}>
                    {s.id}: turns {s.turns.join(", ")} ({s.messageCount} messages)
                    {s.createdAt === undefined ? "" : `, ${formatTime(s.createdAt)}`}
                  </Text>
                  <Spoiler maxHeight={90} showLabel="Show the whole summary" hideLabel="Show less">
                    <pre className="pre">{s.text}</pre>
                  </Spoiler>
                </Paper>
              ))
            )}
            <Title order={3} size="h4">
              Turns
            </Title>
            {h.turns.length === 0 ? (
              <Text size="sm" c="dimmed">
                No turns yet.
              </Text>
            ) : (
              h.turns.map((t) => <Turn key={t.turn} sessionId={id} turn={t} onChange={history.reload} />)
            )}
          </Stack>
        )}
      </Show>
    </Stack>
  )
}
