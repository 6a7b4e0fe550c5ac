/** The types of `build.mjs` (plain JavaScript, so `pnpm start` runs it with node alone). */
export declare const dist: string
export declare const outfile: string
export declare const build: () => Promise<void>
/** `apart`: built by `node build.mjs` in a process of its own. */
export declare const ensureBuilt: (options?: { readonly apart?: boolean }) => Promise<boolean>
