/** Small pieces every view shares: loading a call's answer, showing an error, a session's state. */
import { describeError } from "@ctxo/client/Client"
import { Alert, Badge, Button, Group, Loader, Text } from "@mantine/core"
import { type DependencyList, type ReactNode, useCallback, useEffect, useRef, useState } from "react"

export interface Loaded<A> {
  readonly data: A | undefined
  readonly error: string | undefined
  readonly loading: boolean
  readonly reload: () => void
}

/** The answer of `load`, again whenever `deps` change or `reload` is called; the last call wins. */
export const useLoad = <A,>(load: () => Promise<A>, deps: DependencyList): Loaded<A> => {
  const [data, setData] = useState<A | undefined>(undefined)
  const [error, setError] = useState<string | undefined>(undefined)
  const [loading, setLoading] = useState(true)
  const [tick, setTick] = useState(0)
  const call = useRef(0)
  // biome-ignore lint/correctness/useExhaustiveDependencies: the caller names what the load depends on
  useEffect(() => {
    const mine = ++call.current
    setLoading(true)
    load().then(
      (value) => {
        if (call.current !== mine) return
        setData(value)
        setError(undefined)
        setLoading(false)
      },
      (e: unknown) => {
        if (call.current !== mine) return
        setError(describeError(e))
        setLoading(false)
      }
    )
  }, [...deps, tick])
  const reload = useCallback(() => setTick((t) => t + 1), [])
  return { data, error, loading, reload }
}

/** Runs an action, keeping its error (one sentence) for the view to show. */
export const useAction = () => {
  const [error, setError] = useState<string | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const run = useCallback(async <A,>(action: () => Promise<A>): Promise<A | undefined> => {
    setBusy(true)
    setError(undefined)
    try {
      return await action()
    } catch (e) {
      setError(describeError(e))
      return undefined
    } finally {
      setBusy(false)
    }
  }, [])
  return { error, busy, run, clear: () => setError(undefined) }
}

export const ErrorAlert = ({
  error,
  title = "Error",
  onRetry
}: {
  readonly error: string | undefined
  readonly title?: string
  readonly onRetry?: () => void
}) =>
  error === undefined ? null : (
    <Alert color="red" title={title} role="alert">
      <Group justify="space-between" wrap="nowrap" align="flex-start">
        <Text size="sm" style={{ overflowWrap: "anywhere" }}>
          {error}
        </Text>
        {onRetry === undefined ? null : (
          <Button size="xs" variant="light" color="red" onClick={onRetry}>
            Retry
          </Button>
        )}
      </Group>
    </Alert>
  )

/** The answer of a load: a loader, its error with a retry, or the children with the data. */
export const Show = <A,>({
  loaded,
  children
}: {
  readonly loaded: Loaded<A>
  readonly children: (data: A) => ReactNode
}) => {
  if (loaded.data !== undefined) return <>{children(loaded.data)}</>
  if (loaded.error !== undefined) return <ErrorAlert error={loaded.error} onRetry={loaded.reload} />
  return <Loader size="sm" aria-label="Loading" />
}

const STATE_COLORS = { active: "green", paused: "yellow", ended: "gray" } as const
export const StateBadge = ({ state }: { readonly state: "active" | "paused" | "ended" }) => (
  <Badge color={STATE_COLORS[state]} variant="light">
    {state}
  </Badge>
)

export const formatTime = (iso: string | undefined) =>
  iso === undefined ? "" : new Date(iso).toLocaleString()

export const tokens = (n: number) => n.toLocaleString("en-US")
