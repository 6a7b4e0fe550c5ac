import { hash } from "node:crypto"

export interface CacheStats {
  readonly hits: number
  readonly misses: number
  readonly size: number
  readonly capacity: number
  /** Characters held in keys (texts up to INLINE_KEY_MAX are their own key). */
  readonly keyChars: number
  /** hits / (hits + misses), 0 before the first lookup. */
  readonly hitRatio: number
}

/**
 * Texts up to this length are their own key: the JS engine hashes a string once and keeps that
 * hash on it, so a recompile finds them in well under a microsecond. Longer texts are keyed by
 * their SHA-1 (28 characters), which costs far less than counting them.
 */
export const INLINE_KEY_MAX = 4_096

interface Entry {
  readonly value: number
  /** Looked up since eviction last passed over it. */
  used: boolean
}

/**
 * Token counts of one encoding keyed by content, bounded both by entries and by the characters its
 * keys hold, so memory stays bounded whatever the texts. Eviction is second chance (CLOCK), close to
 * least recently used: the oldest entry goes unless it was looked up since eviction last passed it,
 * in which case it moves to the back unmarked. A hit only sets a flag: a warm compile looks up
 * thousands of texts, and moving each to the back of the map (delete and set) cost five times the
 * lookup itself.
 */
export class CountCache {
  private readonly entries = new Map<string, Entry>()
  private hits = 0
  private misses = 0
  private keyChars = 0

  constructor(
    readonly capacity: number,
    readonly maxKeyChars: number = 16 * 1024 * 1024
  ) {}

  // The text itself, never a copy: a new string would have to be hashed again. Hash keys start
  // with a NUL so no text of the inline size can equal one.
  private key(text: string): string {
    return text.length <= INLINE_KEY_MAX ? text : `\u0000${hash("sha1", text, "base64")}`
  }

  getOrCompute(text: string, compute: (text: string) => number): number {
    if (this.capacity <= 0) return compute(text)
    const key = this.key(text)
    const cached = this.entries.get(key)
    if (cached !== undefined) {
      this.hits++
      cached.used = true
      return cached.value
    }
    this.misses++
    const value = compute(text)
    this.entries.set(key, { value, used: false })
    this.keyChars += key.length
    while (this.entries.size > this.capacity || this.keyChars > this.maxKeyChars) this.evictOne()
    return value
  }

  // A Map iterates in insertion order, so the first key is the oldest. Each pass either evicts or
  // clears a mark, so this ends within one lap of the map.
  private evictOne(): void {
    for (const [key, entry] of this.entries) {
      this.entries.delete(key)
      if (entry.used) {
        entry.used = false
        this.entries.set(key, entry)
      } else {
        this.keyChars -= key.length
        return
      }
    }
  }

  stats(): CacheStats {
    const lookups = this.hits + this.misses
    return {
      hits: this.hits,
      misses: this.misses,
      size: this.entries.size,
      capacity: this.capacity,
      keyChars: this.keyChars,
      hitRatio: lookups === 0 ? 0 : this.hits / lookups
    }
  }

  clear(): void {
    this.entries.clear()
    this.keyChars = 0
  }
}
