/** What to bundle: the entry file, the output file, and text put first (a shebang). */
export interface BundleOptions {
  readonly entry: string
  readonly outfile: string
  readonly banner?: string
}
export declare const bundle: (options: BundleOptions) => Promise<unknown>
export declare const ensureBundle: (options: BundleOptions) => Promise<boolean>
