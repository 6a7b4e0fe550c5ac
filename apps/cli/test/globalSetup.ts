import { buildCli } from "../build.ts"

export default async () => {
  await buildCli()
}
