/** The model registry (`GET /v1/models`) as a select, and the request formats. */
import { NativeSelect, SegmentedControl } from "@mantine/core"
import { useApi } from "./connection.tsx"
import { useLoad } from "./ui.tsx"

export type Format = "openai" | "anthropic" | "react"

export const ModelSelect = ({
  value,
  onChange,
  label = "Model",
  allowDefault = true
}: {
  readonly value: string
  readonly onChange: (model: string) => void
  readonly label?: string
  readonly allowDefault?: boolean
}) => {
  const api = useApi()
  const models = useLoad(() => api.openai.models(), [api])
  const data = [
    ...(allowDefault ? [{ value: "", label: "the session's (manifest, else the gateway's)" }] : []),
    ...(models.data?.data ?? []).map((m) => ({
      value: m.id,
      label: `${m.id} · ${Math.round(m.context_window / 1000)}k`
    }))
  ]
  return (
    <NativeSelect
      label={label}
      value={value}
      data={data}
      onChange={(e) => onChange(e.currentTarget.value)}
      error={models.error}
      miw={220}
    />
  )
}

export const FormatControl = ({
  value,
  onChange
}: {
  readonly value: Format
  readonly onChange: (f: Format) => void
}) => (
  <SegmentedControl
    aria-label="Request format"
    value={value}
    onChange={(v) => onChange(v as Format)}
    data={[
      { value: "openai", label: "OpenAI" },
      { value: "anthropic", label: "Anthropic" },
      { value: "react", label: "ReAct" }
    ]}
  />
)
