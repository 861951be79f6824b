/** A size-bounded map for in-process caches (index bodies and states, GeoJSON grid nodes). */

/** Least recently used first out, bounded by the sum of `sizeOf` over the entries. */
export class Lru<V> {
  private readonly entries = new Map<string, { value: V; size: number }>();
  private total = 0;

  constructor(
    private readonly limit: number,
    private readonly sizeOf: (v: V) => number = () => 1,
  ) {}

  get(key: string): V | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    this.entries.delete(key);
    this.entries.set(key, e);
    return e.value;
  }

  /** Stores (or re-measures, after the value grew) an entry. */
  set(key: string, value: V): void {
    const old = this.entries.get(key);
    if (old) {
      this.total -= old.size;
      this.entries.delete(key);
    }
    const size = this.sizeOf(value);
    if (size > this.limit) return;
    this.entries.set(key, { value, size });
    this.total += size;
    for (const [k, e] of this.entries) {
      if (this.total <= this.limit) break;
      this.entries.delete(k);
      this.total -= e.size;
    }
  }

  get size(): number {
    return this.entries.size;
  }

  get weight(): number {
    return this.total;
  }
}
