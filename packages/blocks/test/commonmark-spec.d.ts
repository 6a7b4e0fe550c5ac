declare module "commonmark-spec" {
  const spec: {
    readonly tests: ReadonlyArray<{ markdown: string; html: string; section: string; number: number }>
  }
  export default spec
}
