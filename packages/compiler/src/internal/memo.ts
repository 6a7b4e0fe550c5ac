/**
 * Small caches that make a warm compile cheap. They hold no state of their own beyond their
 * entries: `CompileCache.make` creates them, and a layer owns them.
 *
 * `memoByKey` remembers the last result for a key while the input is the same value (`===`: for
 * the texts the workspace hands back unchanged, a pointer comparison), at most `capacity` keys,
 * the oldest out first (`same` compares inputs made of several values). `memoByObject` computes a
 * value (never undefined) once per object, kept while it lives. `memoByTag` is one `WeakMap` per
 * tag (a tokenizer) for values whose computation the caller holds. Each counts its hits and misses.
 */

/** Lookups of one cache: answered from it (hits) and computed (misses). */
export interface MemoStats {
  readonly hits: number
  readonly misses: number
}

interface Tally {
  hits: number
  misses: number
}

export interface Memo<F> {
  readonly get: F
  readonly stats: () => MemoStats
}

export const memoByKey = <I, V>(
  capacity: number,
  compute: (input: I, key: string) => V,
  same: (a: I, b: I) => boolean = (a, b) => a === b
): Memo<(key: string, input: I) => V> => {
  const entries = new Map<string, { readonly input: I; readonly value: V }>()
  const tally: Tally = { hits: 0, misses: 0 }
  return {
    get: (key, input) => {
      const hit = entries.get(key)
      if (hit !== undefined && same(hit.input, input)) {
        tally.hits++
        return hit.value
      }
      tally.misses++
      const value = compute(input, key)
      entries.delete(key)
      entries.set(key, { input, value })
      if (entries.size > capacity) entries.delete(entries.keys().next().value!)
      return value
    },
    stats: () => ({ ...tally })
  }
}

export const memoByObject = <K extends object, V extends object | string | number | boolean | null>(
  compute: (object: K) => V
): Memo<(object: K) => V> => {
  const entries = new WeakMap<K, V>()
  const tally: Tally = { hits: 0, misses: 0 }
  return {
    get: (object) => {
      const hit = entries.get(object)
      if (hit !== undefined) {
        tally.hits++
        return hit
      }
      tally.misses++
      const value = compute(object)
      entries.set(object, value)
      return value
    },
    stats: () => ({ ...tally })
  }
}

/** Values of one tag: `get` answers a kept value (a hit) or undefined (a miss, then `set` it). */
export interface TagEntries<K extends object, V> {
  readonly get: (object: K) => V | undefined
  readonly set: (object: K, value: V) => void
}

/** One `WeakMap` per tag (a tokenizer): values computed once per object and tag. */
export const memoByTag = <K extends object, V>(): Memo<(tag: string) => TagEntries<K, V>> => {
  const tags = new Map<string, TagEntries<K, V>>()
  const tally: Tally = { hits: 0, misses: 0 }
  return {
    get: (tag) => {
      let entries = tags.get(tag)
      if (entries === undefined) {
        const map = new WeakMap<K, V>()
        entries = {
          get: (object) => {
            const value = map.get(object)
            if (value === undefined) tally.misses++
            else tally.hits++
            return value
          },
          set: (object, value) => {
            map.set(object, value)
          }
        }
        tags.set(tag, entries)
      }
      return entries
    },
    stats: () => ({ ...tally })
  }
}
