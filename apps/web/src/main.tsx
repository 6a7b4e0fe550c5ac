import "@mantine/core/styles.css"
import "./app.css"
import { createTheme, MantineProvider } from "@mantine/core"
import { StrictMode } from "react"
import { createRoot } from "react-dom/client"
import { App } from "./App.tsx"
import { ConnectionProvider } from "./connection.tsx"

const theme = createTheme({ primaryColor: "indigo", defaultRadius: "sm" })

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <MantineProvider theme={theme} defaultColorScheme="light">
      <ConnectionProvider>
        <App />
      </ConnectionProvider>
    </MantineProvider>
  </StrictMode>
)
