/**
 * Small caches that make a warm compile cheap.
 *
 * `memoByKey` remembers the last result for a key while the input is the same value (`===`: for
 * the texts the workspace hands back unchanged, a pointer comparison), at most `capacity` keys,
 * the oldest out first. `memoByObject` computes a value (never undefined) once per object, kept while it lives.
 */
export const memoByKey = <I, V>(capacity: number, compute: (input: I, key: string) => V) => {
  const entries = new Map<string, { readonly input: I; readonly value: V }>()
  return (key: string, input: I): V => {
    const hit = entries.get(key)
    if (hit !== undefined && hit.input === input) return hit.value
    const value = compute(input, key)
    entries.delete(key)
    entries.set(key, { input, value })
    if (entries.size > capacity) entries.delete(entries.keys().next().value!)
    return value
  }
}

export const memoByObject = <K extends object, V extends object | string | number | boolean | null>(
  compute: (object: K) => V
) => {
  const entries = new WeakMap<K, V>()
  return (object: K): V => {
    const hit = entries.get(object)
    if (hit !== undefined) return hit
    const value = compute(object)
    entries.set(object, value)
    return value
  }
}

/** One `WeakMap` per tag (a tokenizer): values computed once per object and tag. */
export const memoByTag = <K extends object, V>() => {
  const tags = new Map<string, WeakMap<K, V>>()
  return (tag: string): WeakMap<K, V> => {
    let entries = tags.get(tag)
    if (entries === undefined) {
      entries = new WeakMap()
      tags.set(tag, entries)
    }
    return entries
  }
}
