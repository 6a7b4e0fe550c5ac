/**
 * The data root's memory: L3 (agent-level, built by aggregating sessions) and L4 (global,
 * persistent), with expired and deleted entries on request; pin, delete, and persist L3 to L4 now.
 */
import { Button, Checkbox, Group, SegmentedControl, Stack, Text, Title } from "@mantine/core"
import { useState } from "react"
import { useApi } from "../connection.tsx"
import { ErrorAlert, Show, useAction, useLoad } from "../ui.tsx"
import { MemoryEntries } from "./Session.tsx"

export const MemoryView = () => {
  const api = useApi()
  const [level, setLevel] = useState<"L3" | "L4">("L3")
  const [expired, setExpired] = useState(false)
  const [deleted, setDeleted] = useState(false)
  const memory = useLoad(
    () =>
      api.memory.global({
        urlParams: { level, ...(expired ? { expired: "true" } : {}), ...(deleted ? { deleted: "true" } : {}) }
      }),
    [api, level, expired, deleted]
  )
  const action = useAction()
  const [persisted, setPersisted] = useState(false)
  return (
    <Stack>
      <Title order={2}>Memory of the data root</Title>
      <Text size="sm" c="dimmed">
        L3 is agent-level memory, built when sessions are aggregated; L4 is global and kept for good, written
        when a session ends, on the gateway's timer, or now.
      </Text>
      <Group justify="space-between" wrap="wrap">
        <SegmentedControl
          aria-label="Memory level"
          value={level}
          onChange={(v) => setLevel(v as "L3" | "L4")}
          data={[
            { value: "L3", label: "L3 agent" },
            { value: "L4", label: "L4 global" }
          ]}
        />
        <Group gap="md">
          <Checkbox
            label="Expired too"
            checked={expired}
            onChange={(e) => setExpired(e.currentTarget.checked)}
          />
          <Checkbox
            label="Deleted too"
            checked={deleted}
            onChange={(e) => setDeleted(e.currentTarget.checked)}
          />
          <Button
            variant="default"
            onClick={async () => {
              if ((await action.run(() => api.memory.persist())) !== undefined) {
                setPersisted(true)
                setTimeout(memory.reload, 300)
              }
            }}
          >
            Persist L3 to L4 now
          </Button>
        </Group>
      </Group>
      {persisted ? (
        <Text size="sm" role="status">
          Persistence requested: the event bus's subscriber writes L4.
        </Text>
      ) : null}
      <ErrorAlert error={action.error} />
      <Show loaded={memory}>
        {(list) => (
          <MemoryEntries
            entries={list.entries}
            onPin={async (e) => {
              if (
                (await action.run(() =>
                  api.memory.pinGlobal({ path: { entryId: e.id }, payload: { pinned: e.pinned !== true } })
                )) !== undefined
              )
                memory.reload()
            }}
            onDelete={async (e) => {
              await action.run(() => api.memory.deleteGlobal({ path: { entryId: e.id } }))
              memory.reload()
            }}
          />
        )}
      </Show>
    </Stack>
  )
}
