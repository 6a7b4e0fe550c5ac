export declare const outfile: string
export declare const buildCli: () => Promise<unknown>
export declare const ensureBuilt: () => Promise<boolean>
