/**
 * One session's overview: its record and lifecycle, its tasks (added and moved through their
 * statuses here), and its memory levels L1 (newest turns) and L2 (important turns): pin, delete.
 */
import type { MemoryEntryView as EntrySchema } from "@ctxo/api/MemoryApi"
import type { Task } from "@ctxo/store/Records"
import {
  Badge,
  Button,
  Group,
  NativeSelect,
  Paper,
  SegmentedControl,
  Stack,
  Table,
  Text,
  TextInput,
  Title
} from "@mantine/core"
import { useState } from "react"
import { useApi } from "../connection.tsx"
import { Link, sessionPath } from "../router.tsx"
import { ErrorAlert, formatTime, Show, StateBadge, useAction, useLoad } from "../ui.tsx"
import { Lifecycle } from "./Sessions.tsx"

type MemoryEntryView = typeof EntrySchema.Type

const STATUSES = ["pending", "in_progress", "done", "cancelled"] as const

const Tasks = ({ id, ended }: { readonly id: string; readonly ended: boolean }) => {
  const api = useApi()
  const tasks = useLoad(() => api.tasks.list({ path: { id } }), [api, id])
  const action = useAction()
  const [title, setTitle] = useState("")
  const update = async (task: Task, status: (typeof STATUSES)[number]) => {
    if (
      (await action.run(() => api.tasks.update({ path: { id, taskId: task.id }, payload: { status } }))) !==
      undefined
    )
      tasks.reload()
  }
  return (
    <Paper withBorder p="md">
      <Stack gap="xs">
        <Title order={3} size="h5">
          Tasks
        </Title>
        <Show loaded={tasks}>
          {(list) =>
            list.length === 0 ? (
              <Text size="sm" c="dimmed">
                No tasks.
              </Text>
            ) : (
              <Table aria-label="Tasks">
                <Table.Tbody>
                  {list.map((t) => (
                    <Table.Tr key={t.id}>
                      <Table.Td>
                        <Text size="sm">{t.title}</Text>
                        <Text size="xs" c="dimmed">
                          {t.description ?? ""}{" "}
                          {t.origin === undefined
                            ? ""
                            : `(distribution ${t.origin.distributionId}${t.origin.fromSession === undefined ? "" : ` from ${t.origin.fromSession}`})`}
                        </Text>
                      </Table.Td>
                      <Table.Td w={170}>
                        <NativeSelect
                          aria-label={`Status of ${t.title}`}
                          value={t.status}
                          disabled={ended}
                          data={STATUSES.map((s) => ({ value: s, label: s.replace("_", " ") }))}
                          onChange={(e) => update(t, e.currentTarget.value as (typeof STATUSES)[number])}
                        />
                      </Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </Table>
            )
          }
        </Show>
        <form
          onSubmit={async (e) => {
            e.preventDefault()
            if (title.trim() === "") return
            if (
              (await action.run(() =>
                api.tasks.create({ path: { id }, payload: { title: title.trim() } })
              )) !== undefined
            ) {
              setTitle("")
              tasks.reload()
            }
          }}
        >
          <Group align="flex-end">
            <TextInput
              label="New task"
              value={title}
              onChange={(e) => setTitle(e.currentTarget.value)}
              disabled={ended}
              style={{ flex: 1 }}
            />
            <Button type="submit" disabled={ended || title.trim() === ""}>
              Add task
            </Button>
          </Group>
        </form>
        <ErrorAlert error={action.error} />
      </Stack>
    </Paper>
  )
}

export const MemoryEntries = ({
  entries,
  onPin,
  onDelete
}: {
  readonly entries: ReadonlyArray<MemoryEntryView>
  readonly onPin: (entry: MemoryEntryView) => void
  readonly onDelete: (entry: MemoryEntryView) => void
}) =>
  entries.length === 0 ? (
    <Text size="sm" c="dimmed">
      Nothing at this level.
    </Text>
  ) : (
    <Stack gap="xs">
      {entries.map((e) => (
        <Paper key={e.id} withBorder p="xs">
          <Group justify="space-between" align="flex-start" wrap="nowrap">
            <Stack gap={2} style={{ minWidth: 0 }}>
              <Group gap="xs">
                <Text size="xs" fw={600} style={{ overflowWrap: "anywhere" }}>
                  {e.id}
                </Text>
                <Badge size="xs" variant="light">
                  importance {e.importance.toFixed(2)}
                </Badge>
                {e.pinned === true ? <Badge size="xs">pinned</Badge> : null}
                {e.expired ? (
                  <Badge size="xs" color="gray">
                    expired
                  </Badge>
                ) : null}
                {e.deletedAt === undefined ? null : (
                  <Badge size="xs" color="red">
                    deleted
                  </Badge>
                )}
              </Group>
              <Text size="xs" c="dimmed">
                from{" "}
                {e.sources
                  .map((s) => `${s.session}${s.turn === undefined ? "" : ` turn ${s.turn}`}`)
                  .join(", ")}{" "}
                · {formatTime(e.updatedAt)}
              </Text>
              <pre className="pre">{e.text.length > 600 ? `${e.text.slice(0, 600)}…` : e.text}</pre>
            </Stack>
            <Stack gap={4}>
              <Button size="xs" variant="default" onClick={() => onPin(e)}>
                {e.pinned === true ? "Unpin" : "Pin"}
              </Button>
              {e.deletedAt === undefined ? (
                <Button size="xs" variant="subtle" color="red" onClick={() => onDelete(e)}>
                  Delete
                </Button>
              ) : null}
            </Stack>
          </Group>
        </Paper>
      ))}
    </Stack>
  )

const SessionMemory = ({ id }: { readonly id: string }) => {
  const api = useApi()
  const [level, setLevel] = useState<"L1" | "L2">("L1")
  const memory = useLoad(() => api.memory.session({ path: { id }, urlParams: { level } }), [api, id, level])
  const action = useAction()
  return (
    <Paper withBorder p="md">
      <Stack gap="xs">
        <Group justify="space-between">
          <Title order={3} size="h5">
            Memory
          </Title>
          <SegmentedControl
            aria-label="Memory level"
            value={level}
            onChange={(v) => setLevel(v as "L1" | "L2")}
            data={[
              { value: "L1", label: "L1 newest turns" },
              { value: "L2", label: "L2 important" }
            ]}
          />
        </Group>
        <Show loaded={memory}>
          {(list) => (
            <MemoryEntries
              entries={list.entries}
              onPin={async (e) => {
                if (
                  (await action.run(() =>
                    api.memory.pinSession({
                      path: { id, entryId: e.id },
                      payload: { pinned: e.pinned !== true }
                    })
                  )) !== undefined
                )
                  memory.reload()
              }}
              onDelete={async (e) => {
                await action.run(() => api.memory.deleteSession({ path: { id, entryId: e.id } }))
                memory.reload()
              }}
            />
          )}
        </Show>
        <ErrorAlert error={action.error} />
      </Stack>
    </Paper>
  )
}

export const SessionView = ({ id }: { readonly id: string }) => {
  const api = useApi()
  const record = useLoad(() => api.sessions.get({ path: { id } }), [api, id])
  return (
    <Stack>
      <Show loaded={record}>
        {(s) => (
          <Stack gap="xs">
            <Group gap="sm">
              <Title order={2} style={{ overflowWrap: "anywhere" }}>
                {s.id}
              </Title>
              <StateBadge state={s.state} />
            </Group>
            <Text>{s.concept}</Text>
            <Text size="xs" c="dimmed">
              created {formatTime(s.createdAt)} · {s.state} since {formatTime(s.stateChangedAt)}
              {Object.keys(s.metadata).length === 0
                ? ""
                : ` · ${Object.entries(s.metadata)
                    .map(([k, v]) => `${k}=${v}`)
                    .join(" ")}`}
            </Text>
            <Lifecycle session={s} onChange={record.reload} />
            <Group gap="xs">
              <Link href={sessionPath(id, "chat")}>Chat</Link>·
              <Link href={sessionPath(id, "blocks")}>Blocks</Link>·
              <Link href={sessionPath(id, "context")}>Context</Link>·
              <Link href={sessionPath(id, "history")}>History</Link>
            </Group>
            <Tasks id={id} ended={s.state === "ended"} />
            <SessionMemory id={id} />
          </Stack>
        )}
      </Show>
    </Stack>
  )
}
