/** What to bundle: the entry file, the output file, and text put first (a shebang). */
export interface BundleOptions {
  readonly entry: string
  readonly outfile: string
  readonly banner?: string
}
export declare const bundle: (options: BundleOptions) => Promise<unknown>
export declare const ensureBundle: (
  options: BundleOptions,
  apart?: { readonly script: string }
) => Promise<boolean>
export declare const buildApart: (script: string) => () => Promise<void>
export declare const ensureBuilt: (options: {
  readonly app: string
  readonly outfile: string
  readonly build: () => Promise<unknown>
  readonly files?: ReadonlyArray<string>
  readonly packages?: ReadonlyArray<string>
}) => Promise<boolean>
