/**
 * Many sessions into one agent's request (`POST /api/context/aggregate`): pick the sessions and
 * the question; see what each session gave, the blocks kept and dropped with where each came from
 * (session, memory level, source), and the request.
 */
import type { Aggregated } from "@ctxo/api/AggregateApi"
import { Badge, Button, Checkbox, Group, Paper, Stack, Table, Text, Textarea, Title } from "@mantine/core"
import { useState } from "react"
import { useApi } from "../connection.tsx"
import { type Format, FormatControl, ModelSelect } from "../models.tsx"
import { ErrorAlert, Show, StateBadge, tokens, useAction, useLoad } from "../ui.tsx"

const requestText = (a: Aggregated) =>
  a.format === "react" ? a.request.prompt : JSON.stringify(a.request, null, 2)

export const AggregateView = () => {
  const api = useApi()
  const sessions = useLoad(() => api.sessions.list(), [api])
  const [chosen, setChosen] = useState<ReadonlyArray<string>>([])
  const [query, setQuery] = useState("")
  const [model, setModel] = useState("")
  const [format, setFormat] = useState<Format>("openai")
  const action = useAction()
  const [result, setResult] = useState<Aggregated | undefined>(undefined)
  const [problem, setProblem] = useState<string | undefined>(undefined)
  return (
    <Stack>
      <Title order={2}>Aggregate sessions</Title>
      <Text size="sm" c="dimmed">
        Each chosen session compiles the question as its next input; their blocks are merged, ranked and cut
        into one request for one agent. Aggregating also promotes the sessions' important turns (L2) to agent
        memory (L3).
      </Text>
      <Paper withBorder p="md">
        <form
          aria-label="Aggregate"
          onSubmit={async (e) => {
            e.preventDefault()
            if (chosen.length === 0) return setProblem("Choose at least one session to aggregate.")
            if (query.trim() === "") return setProblem("Write the question the aggregated context is for.")
            setProblem(undefined)
            const answer = await action.run(() =>
              api.aggregate.aggregate({
                payload: { sessions: [...chosen], query, format, ...(model === "" ? {} : { model }) }
              })
            )
            if (answer !== undefined) setResult(answer)
          }}
        >
          <Stack gap="sm">
            <Show loaded={sessions}>
              {(list) => (
                <Checkbox.Group label="Sessions" value={[...chosen]} onChange={setChosen}>
                  <Group gap="md" mt={4}>
                    {list.map((s) => (
                      <Checkbox
                        key={s.id}
                        value={s.id}
                        label={`${s.id}${s.state === "active" ? "" : ` (${s.state})`}`}
                      />
                    ))}
                  </Group>
                </Checkbox.Group>
              )}
            </Show>
            <Textarea
              label="Question"
              autosize
              minRows={2}
              value={query}
              onChange={(e) => setQuery(e.currentTarget.value)}
            />
            <Group align="flex-end" wrap="wrap">
              <ModelSelect value={model} onChange={setModel} allowDefault={false} />
              <FormatControl value={format} onChange={setFormat} />
              <Button type="submit" loading={action.busy}>
                Aggregate
              </Button>
            </Group>
            <ErrorAlert error={problem ?? action.error} />
          </Stack>
        </form>
      </Paper>
      {result === undefined ? null : (
        <Stack>
          <Text role="status">
            {result.model}: {result.blocks.filter((b) => b.status === "included").length} of{" "}
            {result.blocks.length} blocks kept; {result.promoted} memories promoted to L3
          </Text>
          <Table.ScrollContainer minWidth={480}>
            <Table aria-label="Sessions aggregated">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Session</Table.Th>
                  <Table.Th>State</Table.Th>
                  <Table.Th>Blocks</Table.Th>
                  <Table.Th>Its request</Table.Th>
                  <Table.Th>Withheld</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {result.sessions.map((s) => (
                  <Table.Tr key={s.session}>
                    <Table.Td>{s.session}</Table.Td>
                    <Table.Td>
                      <StateBadge state={s.state} />
                    </Table.Td>
                    <Table.Td>{s.blocks}</Table.Td>
                    <Table.Td>{tokens(s.tokens)} tokens</Table.Td>
                    <Table.Td>{s.withheld}</Table.Td>
                  </Table.Tr>
                ))}
                {result.skipped.map((s) => (
                  <Table.Tr key={s.session}>
                    <Table.Td>{s.session}</Table.Td>
                    <Table.Td colSpan={4}>
                      skipped ({s.reason}): {s.message}
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
          <Title order={3} size="h5">
            Blocks, best ranked first
          </Title>
          <Table.ScrollContainer minWidth={560}>
            <Table aria-label="Aggregated blocks">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Block</Table.Th>
                  <Table.Th>From</Table.Th>
                  <Table.Th>Tokens</Table.Th>
                  <Table.Th>Kept</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {result.blocks.map((b) => (
                  <Table.Tr key={b.id}>
                    <Table.Td>
                      <Text size="xs">{b.id}</Text>
                      <Text size="xs" c="dimmed">
                        relevance {b.score.toFixed(2)}
                      </Text>
                    </Table.Td>
                    <Table.Td>
                      {b.provenance.map((p) => (
                        <Text size="xs" key={`${p.session}-${p.unit}`}>
                          {p.session} · {p.level ?? "—"} · {p.source} · {p.unit}
                        </Text>
                      ))}
                    </Table.Td>
                    <Table.Td>{tokens(b.tokens)}</Table.Td>
                    <Table.Td>
                      {b.status === "included" ? (
                        <Badge color="green" variant="light">
                          kept
                        </Badge>
                      ) : (
                        <Text size="xs">dropped: {b.reason}</Text>
                      )}
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
          <Title order={3} size="h5">
            The request ({result.format})
          </Title>
          <pre className="pre scroll-box">{requestText(result)}</pre>
        </Stack>
      )}
    </Stack>
  )
}
