import { buildCli } from "../build.mjs"

export default async () => {
  await buildCli()
}
