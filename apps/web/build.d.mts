/** The types of `build.mjs` (plain JavaScript, so `pnpm start` runs it with node alone). */
export declare const dist: string
export declare const outfile: string
export declare const build: () => Promise<void>
export declare const ensureBuilt: () => Promise<boolean>
