/**
 * The page's one connection to the gateway (`@ctxo/client`): the page's own origin, and the API key
 * the person entered (kept in this tab's sessionStorage, or in localStorage when they ask the page
 * to remember it). Changing the key makes a new connection and every view loads again.
 */
import { type Connection, connect } from "@ctxo/client/Client"
import { createContext, type ReactNode, useContext, useMemo, useState } from "react"

const KEY = "ctxo.apiKey"

const storedKey = () => sessionStorage.getItem(KEY) ?? localStorage.getItem(KEY) ?? ""

interface ConnectionState {
  readonly connection: Connection
  readonly apiKey: string
  readonly setApiKey: (key: string, remember: boolean) => void
}

const Context = createContext<ConnectionState | undefined>(undefined)

export const ConnectionProvider = ({ children }: { readonly children: ReactNode }) => {
  const [apiKey, setKey] = useState(storedKey)
  // A connection holds no resources of its own (fetch): one replaced by a new key is left to the
  // garbage collector rather than disposed under a view that may still be reading from it.
  const connection = useMemo(() => connect({ baseUrl: window.location.origin, apiKey }), [apiKey])
  const value = useMemo<ConnectionState>(
    () => ({
      connection,
      apiKey,
      setApiKey: (key, remember) => {
        sessionStorage.removeItem(KEY)
        localStorage.removeItem(KEY)
        if (key !== "") (remember ? localStorage : sessionStorage).setItem(KEY, key)
        setKey(key)
      }
    }),
    [connection, apiKey]
  )
  return <Context.Provider value={value}>{children}</Context.Provider>
}

export const useConnection = (): ConnectionState => {
  const state = useContext(Context)
  if (state === undefined) throw new Error("useConnection outside ConnectionProvider")
  return state
}

/** The contract's endpoints as promises. */
export const useApi = () => useConnection().connection.api
