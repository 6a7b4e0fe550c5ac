/**
 * The workbench's frame: a header (the API key), a navigation bar (sessions, aggregate, memory,
 * and the open session's views) that folds into a menu button on narrow screens, and the view the
 * address names. A skip link leads past the navigation for keyboard users.
 */
import {
  AppShell,
  Burger,
  Button,
  Checkbox,
  Group,
  Modal,
  NavLink,
  PasswordInput,
  Stack,
  Text,
  Title
} from "@mantine/core"
import { useDisclosure } from "@mantine/hooks"
import { useEffect, useState } from "react"
import { useConnection } from "./connection.tsx"
import { Link, navigate, type SessionTab, sessionPath, useRoute } from "./router.tsx"
import { AggregateView } from "./views/Aggregate.tsx"
import { BlocksView } from "./views/Blocks.tsx"
import { ChatView } from "./views/Chat.tsx"
import { ContextView } from "./views/Context.tsx"
import { HistoryView } from "./views/History.tsx"
import { MemoryView } from "./views/Memory.tsx"
import { SessionView } from "./views/Session.tsx"
import { SessionsView } from "./views/Sessions.tsx"

const TABS: ReadonlyArray<readonly [SessionTab, string]> = [
  ["overview", "Overview"],
  ["chat", "Chat"],
  ["blocks", "Blocks"],
  ["context", "Context"],
  ["history", "History"]
]

const KeyDialog = ({ opened, onClose }: { readonly opened: boolean; readonly onClose: () => void }) => {
  const { apiKey, setApiKey } = useConnection()
  const [value, setValue] = useState(apiKey)
  const [remember, setRemember] = useState(localStorage.getItem("ctxo.apiKey") !== null)
  useEffect(() => setValue(apiKey), [apiKey])
  return (
    <Modal opened={opened} onClose={onClose} title="API key">
      <form
        onSubmit={(e) => {
          e.preventDefault()
          setApiKey(value.trim(), remember)
          onClose()
        }}
      >
        <Stack>
          <Text size="sm">
            With API keys configured (CTXO_API_KEYS), every call this page makes needs one; it is sent as
            Authorization: Bearer and kept in this browser only.
          </Text>
          <PasswordInput
            label="Key"
            value={value}
            onChange={(e) => setValue(e.currentTarget.value)}
            data-autofocus
          />
          <Checkbox
            label="Remember on this computer"
            checked={remember}
            onChange={(e) => setRemember(e.currentTarget.checked)}
          />
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setValue("")}>
              Clear
            </Button>
            <Button type="submit">Use this key</Button>
          </Group>
        </Stack>
      </form>
    </Modal>
  )
}

export const App = () => {
  const route = useRoute()
  const [navOpen, nav] = useDisclosure(false)
  const [keyOpen, keyDialog] = useDisclosure(false)
  const { apiKey } = useConnection()
  const where = `${route.view}:${"id" in route ? route.id : ""}:${"tab" in route ? route.tab : ""}`
  // A new view: close the menu and say where the person is.
  // biome-ignore lint/correctness/useExhaustiveDependencies: on a change of view only
  useEffect(() => {
    nav.close()
    document.title = `${route.view === "session" ? `${route.id} · ${route.tab}` : route.view} · ctxo workbench`
  }, [where])

  const go = (path: string) => (e: React.MouseEvent) => {
    e.preventDefault()
    navigate(path)
  }
  return (
    <AppShell
      header={{ height: 52 }}
      navbar={{ width: 220, breakpoint: "sm", collapsed: { mobile: !navOpen } }}
      padding="md"
    >
      <a href="#main" className="skip-link">
        Skip to content
      </a>
      <AppShell.Header>
        <Group h="100%" px="md" justify="space-between" wrap="nowrap">
          <Group gap="sm" wrap="nowrap">
            <Burger
              opened={navOpen}
              onClick={nav.toggle}
              hiddenFrom="sm"
              size="sm"
              aria-label={navOpen ? "Close navigation" : "Open navigation"}
            />
            <Title order={1} size="h4">
              <Link href="/" style={{ color: "inherit", textDecoration: "none" }}>
                ctxo workbench
              </Link>
            </Title>
          </Group>
          <Button variant={apiKey === "" ? "default" : "light"} size="xs" onClick={keyDialog.open}>
            {apiKey === "" ? "API key" : "Key set"}
          </Button>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="xs" aria-label="Views">
        <NavLink
          component="a"
          href="/"
          label="Sessions"
          active={route.view === "sessions"}
          onClick={go("/")}
        />
        <NavLink
          component="a"
          href="/aggregate"
          label="Aggregate"
          active={route.view === "aggregate"}
          onClick={go("/aggregate")}
        />
        <NavLink
          component="a"
          href="/memory"
          label="Memory (L3, L4)"
          active={route.view === "memory"}
          onClick={go("/memory")}
        />
        {route.view === "session" ? (
          <>
            <Text size="xs" c="dimmed" mt="md" px="sm" style={{ overflowWrap: "anywhere" }}>
              Session {route.id}
            </Text>
            {TABS.map(([tab, label]) => (
              <NavLink
                key={tab}
                component="a"
                href={sessionPath(route.id, tab)}
                label={label}
                active={route.tab === tab}
                aria-current={route.tab === tab ? "page" : undefined}
                onClick={go(sessionPath(route.id, tab))}
              />
            ))}
          </>
        ) : null}
      </AppShell.Navbar>
      <AppShell.Main id="main" tabIndex={-1} style={{ outline: "none" }}>
        {route.view === "sessions" ? <SessionsView /> : null}
        {route.view === "aggregate" ? <AggregateView /> : null}
        {route.view === "memory" ? <MemoryView /> : null}
        {route.view === "session" && route.tab === "overview" ? <SessionView id={route.id} /> : null}
        {route.view === "session" && route.tab === "chat" ? <ChatView key={route.id} id={route.id} /> : null}
        {route.view === "session" && route.tab === "blocks" ? (
          <BlocksView key={route.id} id={route.id} />
        ) : null}
        {route.view === "session" && route.tab === "context" ? (
          <ContextView key={route.id} id={route.id} />
        ) : null}
        {route.view === "session" && route.tab === "history" ? (
          <HistoryView key={route.id} id={route.id} />
        ) : null}
        {route.view === "not-found" ? (
          <Text>
            No view at {route.path}. <Link href="/">Back to the sessions</Link>
          </Text>
        ) : null}
      </AppShell.Main>
      <KeyDialog opened={keyOpen} onClose={keyDialog.close} />
    </AppShell>
  )
}
