export declare const outfile: string
/** `apart`: built by `node build.mjs` in a process of its own. */
export declare const ensureBuilt: (options?: { readonly apart?: boolean }) => Promise<boolean>
