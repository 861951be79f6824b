/**
 * Group commit: the first item is written at once (next turn of the event loop); the items that
 * arrive while that write runs are written together by the next one, in one statement.
 *
 * Writes run one at a time, so one that never settles would hold up every later write of the
 * process for good: postgres.js can leave a query unsettled when its connection is cut
 * mid-flight (a PostgreSQL restart). A write that has not settled within `timeoutMs` therefore
 * fails its batch (with BatchWriteTimeout) and the next batch goes ahead. Its late result, if any,
 * is ignored.
 */

/** How long one group write may take before its batch fails and the next one goes ahead. */
export const BATCH_WRITE_TIMEOUT_MS = 30_000;

export class BatchWriteTimeout extends Error {
  constructor(ms: number) {
    super(`database write did not settle within ${ms} ms`);
    this.name = 'BatchWriteTimeout';
  }
}

export class Batcher<I, R> {
  private queue: Array<{ item: I; resolve: (r: R) => void; reject: (e: unknown) => void }> = [];
  private writing = false;
  constructor(
    private readonly write: (items: I[]) => Promise<R[]>,
    private readonly maxBatch = 500,
    private readonly timeoutMs = BATCH_WRITE_TIMEOUT_MS,
  ) {}

  add(item: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.writing) {
        this.writing = true;
        setImmediate(() => void this.drain());
      }
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length) {
      const batch = this.queue.splice(0, this.maxBatch);
      let timer: NodeJS.Timeout | undefined;
      try {
        const write = this.write(batch.map((b) => b.item));
        write.catch(() => {}); // settles after the timeout: nobody waits for it any more
        const results = await Promise.race([
          write,
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new BatchWriteTimeout(this.timeoutMs)), this.timeoutMs);
          }),
        ]);
        for (const [i, b] of batch.entries()) b.resolve(results[i]!);
      } catch (err) {
        for (const b of batch) b.reject(err);
      } finally {
        clearTimeout(timer);
      }
    }
    this.writing = false;
  }
}
