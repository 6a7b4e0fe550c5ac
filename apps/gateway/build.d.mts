export declare const outfile: string
export declare const ensureBuilt: () => Promise<boolean>
