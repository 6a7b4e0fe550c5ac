/**
 * The page's routes, in the address bar so a reload or a shared link opens the same view (the
 * gateway answers each of them with the page): `/` sessions, `/aggregate`, `/memory`,
 * `/sessions/:id` (its overview) and `/sessions/:id/chat|blocks|context|history`.
 */
import { type AnchorHTMLAttributes, type MouseEvent, useEffect, useState } from "react"

export type SessionTab = "overview" | "chat" | "blocks" | "context" | "history"
export type Route =
  | { readonly view: "sessions" }
  | { readonly view: "aggregate" }
  | { readonly view: "memory" }
  | { readonly view: "session"; readonly id: string; readonly tab: SessionTab }
  | { readonly view: "not-found"; readonly path: string }

const TABS: ReadonlyArray<SessionTab> = ["chat", "blocks", "context", "history"]

export const parseRoute = (pathname: string): Route => {
  const path = pathname.replace(/\/+$/, "") || "/"
  if (path === "/") return { view: "sessions" }
  if (path === "/aggregate") return { view: "aggregate" }
  if (path === "/memory") return { view: "memory" }
  const m = /^\/sessions\/([^/]+)(?:\/([^/]+))?$/.exec(path)
  if (m !== null) {
    const tab = m[2] === undefined ? "overview" : (TABS.find((t) => t === m[2]) ?? null)
    if (tab !== null) return { view: "session", id: decodeURIComponent(m[1]!), tab }
  }
  return { view: "not-found", path }
}

export const sessionPath = (id: string, tab: SessionTab = "overview") =>
  `/sessions/${encodeURIComponent(id)}${tab === "overview" ? "" : `/${tab}`}`

const listeners = new Set<() => void>()
window.addEventListener("popstate", () => {
  for (const l of listeners) l()
})

export const navigate = (path: string) => {
  if (path === window.location.pathname) return
  window.history.pushState(null, "", path)
  for (const l of listeners) l()
}

export const useRoute = (): Route => {
  const [pathname, setPathname] = useState(window.location.pathname)
  useEffect(() => {
    const listener = () => setPathname(window.location.pathname)
    listeners.add(listener)
    return () => void listeners.delete(listener)
  }, [])
  return parseRoute(pathname)
}

/** A link within the page: a real anchor (keyboard, middle click), moved to without a reload. */
export const Link = ({
  href,
  onClick,
  ...rest
}: AnchorHTMLAttributes<HTMLAnchorElement> & { readonly href: string }) => (
  <a
    href={href}
    onClick={(event: MouseEvent<HTMLAnchorElement>) => {
      onClick?.(event)
      if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey)
        return
      event.preventDefault()
      navigate(href)
    }}
    {...rest}
  />
)
