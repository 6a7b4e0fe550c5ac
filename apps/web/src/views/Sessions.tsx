/**
 * Sessions: every session with its lifecycle state, created here (an id or one made up, a
 * concept, metadata as `key=value` lines), paused, resumed and ended here (ending asks first: it
 * is final).
 */
import type { DistributionResult, SessionRecord } from "@ctxo/store/Records"
import {
  Button,
  Checkbox,
  Group,
  Paper,
  SegmentedControl,
  Stack,
  Table,
  Text,
  Textarea,
  TextInput,
  Title
} from "@mantine/core"
import { useState } from "react"
import { useApi } from "../connection.tsx"
import { Link, navigate, sessionPath } from "../router.tsx"
import { ErrorAlert, formatTime, Show, StateBadge, useAction, useLoad } from "../ui.tsx"

/** `key=value` lines as metadata; a line that is not one is named. */
export const parseMetadata = (text: string): { metadata: Record<string, string> } | { error: string } => {
  const metadata: Record<string, string> = {}
  for (const [i, raw] of text.split("\n").entries()) {
    const line = raw.trim()
    if (line === "") continue
    const eq = line.indexOf("=")
    if (eq <= 0) return { error: `Metadata line ${i + 1} is not key=value: ${line.slice(0, 60)}` }
    metadata[line.slice(0, eq).trim()] = line.slice(eq + 1).trim()
  }
  return { metadata }
}

export const Lifecycle = ({
  session,
  onChange
}: {
  readonly session: SessionRecord
  readonly onChange: (s: SessionRecord) => void
}) => {
  const api = useApi()
  const action = useAction()
  const [confirmEnd, setConfirmEnd] = useState(false)
  const path = { path: { id: session.id } }
  const run = async (call: () => Promise<SessionRecord>) => {
    const next = await action.run(call)
    if (next !== undefined) onChange(next)
    setConfirmEnd(false)
  }
  return (
    <Stack gap={4}>
      <Group gap="xs" wrap="wrap">
        {session.state === "active" ? (
          <Button
            size="xs"
            variant="default"
            loading={action.busy}
            onClick={() => run(() => api.sessions.pause(path))}
          >
            Pause {session.id}
          </Button>
        ) : null}
        {session.state === "paused" ? (
          <Button
            size="xs"
            variant="default"
            loading={action.busy}
            onClick={() => run(() => api.sessions.resume(path))}
          >
            Resume {session.id}
          </Button>
        ) : null}
        {session.state !== "ended" && !confirmEnd ? (
          <Button size="xs" variant="subtle" color="red" onClick={() => setConfirmEnd(true)}>
            End {session.id}
          </Button>
        ) : null}
        {confirmEnd ? (
          <>
            <Text size="xs">Ending is final: no more turns or tasks.</Text>
            <Button
              size="xs"
              color="red"
              loading={action.busy}
              onClick={() => run(() => api.sessions.end(path))}
            >
              End it
            </Button>
            <Button size="xs" variant="default" onClick={() => setConfirmEnd(false)}>
              Keep it
            </Button>
          </>
        ) : null}
      </Group>
      <ErrorAlert error={action.error} />
    </Stack>
  )
}

const CreateSession = ({ onCreated }: { readonly onCreated: (s: SessionRecord) => void }) => {
  const api = useApi()
  const action = useAction()
  const [id, setId] = useState("")
  const [concept, setConcept] = useState("")
  const [meta, setMeta] = useState("")
  const [problem, setProblem] = useState<string | undefined>(undefined)
  return (
    <Paper withBorder p="md">
      <form
        aria-label="New session"
        onSubmit={async (e) => {
          e.preventDefault()
          const parsed = parseMetadata(meta)
          if ("error" in parsed) return setProblem(parsed.error)
          if (concept.trim() === "") return setProblem("Say what the session is about (its concept).")
          setProblem(undefined)
          const created = await action.run(() =>
            api.sessions.create({
              payload: {
                concept: concept.trim(),
                ...(id.trim() === "" ? {} : { id: id.trim() }),
                ...(Object.keys(parsed.metadata).length === 0 ? {} : { metadata: parsed.metadata })
              }
            })
          )
          if (created !== undefined) {
            setId("")
            setConcept("")
            setMeta("")
            onCreated(created)
          }
        }}
      >
        <Stack gap="xs">
          <Title order={3} size="h5">
            New session
          </Title>
          <Group grow align="flex-start" wrap="wrap">
            <TextInput
              label="Id"
              description="Letters, digits, . _ - (empty: one is made up)"
              value={id}
              onChange={(e) => setId(e.currentTarget.value)}
              miw={180}
            />
            <TextInput
              label="Concept"
              description="What it is about"
              value={concept}
              onChange={(e) => setConcept(e.currentTarget.value)}
              miw={180}
            />
          </Group>
          <Textarea
            label="Metadata"
            description="key=value, one a line (tasks can be sent to sessions by it)"
            autosize
            minRows={1}
            value={meta}
            onChange={(e) => setMeta(e.currentTarget.value)}
          />
          <ErrorAlert error={problem ?? action.error} />
          <Group>
            <Button type="submit" loading={action.busy}>
              Create session
            </Button>
          </Group>
        </Stack>
      </form>
    </Paper>
  )
}

/**
 * One task for many sessions (`POST /api/tasks/distribute`): to every chosen session (or all of
 * them), or to those whose metadata and concept match; each session's task or why it was skipped.
 */
const DistributeTask = ({
  sessions,
  onDone
}: {
  readonly sessions: ReadonlyArray<SessionRecord>
  readonly onDone: () => void
}) => {
  const api = useApi()
  const action = useAction()
  const [title, setTitle] = useState("")
  const [mode, setMode] = useState<"broadcast" | "filtered">("broadcast")
  const [chosen, setChosen] = useState<ReadonlyArray<string>>([])
  const [meta, setMeta] = useState("")
  const [concept, setConcept] = useState("")
  const [problem, setProblem] = useState<string | undefined>(undefined)
  const [results, setResults] = useState<ReadonlyArray<DistributionResult> | undefined>(undefined)
  return (
    <Paper withBorder p="md">
      <form
        aria-label="Distribute a task"
        onSubmit={async (e) => {
          e.preventDefault()
          if (title.trim() === "") return setProblem("Give the task a title.")
          const parsed = parseMetadata(meta)
          if ("error" in parsed) return setProblem(parsed.error)
          const filter = {
            ...(Object.keys(parsed.metadata).length === 0 ? {} : { metadata: parsed.metadata }),
            ...(concept.trim() === "" ? {} : { concept: concept.trim() })
          }
          if (mode === "filtered" && Object.keys(filter).length === 0)
            return setProblem("A filtered distribution needs metadata pairs or a concept to select on.")
          setProblem(undefined)
          const answer = await action.run(() =>
            api.tasks.distribute({
              headers: {},
              payload: {
                task: { title: title.trim() },
                mode,
                ...(chosen.length === 0 ? {} : { sessions: [...chosen] }),
                ...(mode === "filtered" ? { filter } : {})
              }
            })
          )
          if (answer !== undefined) {
            setResults(answer.results)
            setTitle("")
            onDone()
          }
        }}
      >
        <Stack gap="xs">
          <Title order={3} size="h5">
            Distribute a task
          </Title>
          <Group align="flex-end" wrap="wrap">
            <TextInput
              label="Task"
              value={title}
              onChange={(e) => setTitle(e.currentTarget.value)}
              style={{ flex: 1 }}
              miw={200}
            />
            <SegmentedControl
              aria-label="Distribution"
              value={mode}
              onChange={(v) => setMode(v as "broadcast" | "filtered")}
              data={[
                { value: "broadcast", label: "To these sessions" },
                { value: "filtered", label: "To those that match" }
              ]}
            />
          </Group>
          <Checkbox.Group
            label="Sessions (none chosen: every session)"
            value={[...chosen]}
            onChange={setChosen}
          >
            <Group gap="md" mt={4}>
              {sessions.map((s) => (
                <Checkbox key={s.id} value={s.id} label={s.id} />
              ))}
            </Group>
          </Checkbox.Group>
          {mode === "filtered" ? (
            <Group grow wrap="wrap" align="flex-start">
              <Textarea
                label="Metadata to match"
                description="key=value, one a line"
                autosize
                minRows={1}
                value={meta}
                onChange={(e) => setMeta(e.currentTarget.value)}
                miw={180}
              />
              <TextInput
                label="Concept contains"
                value={concept}
                onChange={(e) => setConcept(e.currentTarget.value)}
                miw={180}
              />
            </Group>
          ) : null}
          <ErrorAlert error={problem ?? action.error} />
          <Group>
            <Button type="submit" loading={action.busy}>
              Distribute
            </Button>
          </Group>
          {results === undefined ? null : (
            <Stack gap={2} role="status" aria-label="Distribution results">
              {results.map((r) => (
                <Text key={r.session} size="sm">
                  {r.session}:{" "}
                  {"taskId" in r ? `task ${r.taskId} added` : `skipped (${r.skipped}): ${r.message}`}
                </Text>
              ))}
            </Stack>
          )}
        </Stack>
      </form>
    </Paper>
  )
}

export const SessionsView = () => {
  const api = useApi()
  const sessions = useLoad(() => api.sessions.list(), [api])
  return (
    <Stack>
      <Title order={2}>Sessions</Title>
      <Show loaded={sessions}>
        {(list) => (
          <Table.ScrollContainer minWidth={340}>
            <Table striped highlightOnHover aria-label="Sessions">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Session</Table.Th>
                  <Table.Th>Concept</Table.Th>
                  <Table.Th>State</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {list.map((s) => (
                  <Table.Tr key={s.id} data-session={s.id}>
                    <Table.Td>
                      <Link href={sessionPath(s.id)}>{s.id}</Link>
                      {Object.keys(s.metadata).length === 0 ? null : (
                        <Text size="xs" c="dimmed">
                          {Object.entries(s.metadata)
                            .map(([k, v]) => `${k}=${v}`)
                            .join(" ")}
                        </Text>
                      )}
                    </Table.Td>
                    <Table.Td>{s.concept}</Table.Td>
                    <Table.Td>
                      <StateBadge state={s.state} />
                      <Text size="xs" c="dimmed" mb={4}>
                        since {formatTime(s.stateChangedAt)}
                      </Text>
                      <Lifecycle session={s} onChange={sessions.reload} />
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        )}
      </Show>
      <CreateSession onCreated={(s) => navigate(sessionPath(s.id, "chat"))} />
      {sessions.data === undefined ? null : (
        <DistributeTask sessions={sessions.data} onDone={sessions.reload} />
      )}
    </Stack>
  )
}
