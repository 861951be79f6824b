/**
 * The database queue on the embedded database backs off its idle polls (issue #25: the all-in-one
 * process's background work). What it must not lose: a job enqueued in this process, a delayed
 * job and a retry's backoff each wake the consumer at their time, however far the idle polls have
 * backed off. For those, the consumers here poll every 60 s when idle: a lost wake-up would show
 * as a job still waiting after the 15 s these tests allow (the work itself takes well under a
 * second).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/platform/database.js';
import { DatabaseQueues } from '../../src/platform/queue/database-queues.js';
import { disposeDatabase, freshDatabase, uniqueName } from '../helpers/backends.js';
import { until } from '../helpers/wait.js';

/** The real database, its claim statements counted (each idle poll is one). */
function countingClaims(db: Database): Database & { claims: number } {
  const counted = Object.create(db) as Database & { claims: number };
  counted.claims = 0;
  counted.query = ((sql: string, ...rest: unknown[]) => {
    if (/^\s*UPDATE jobs j SET state = 'active'/.test(sql)) counted.claims++;
    return (db.query as (...a: unknown[]) => unknown)(sql, ...rest);
  }) as Database['query'];
  return counted;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const IDLE_MS = 60_000;
const ALLOWED_MS = 15_000;

const within = (what: string, cond: () => boolean | Promise<boolean>) => until(what, cond, ALLOWED_MS);

describe('database queue on the embedded database: idle polls back off, wake-ups are kept', () => {
  let db: Database;
  const open: DatabaseQueues[] = [];
  /** A consumer whose only poll without a wake-up is its first, at start. */
  const idleConsumer = async <T>(handler: (data: T, attempt: number) => Promise<void>) => {
    const q = new DatabaseQueues({ db, prefix: uniqueName('q'), pollMs: IDLE_MS, idlePollMaxMs: IDLE_MS });
    open.push(q);
    const queue = uniqueName('idle');
    q.process<T>(queue, (data, ctx) => handler(data, ctx.attempt));
    await sleep(300);
    return { q, queue };
  };

  beforeAll(async () => {
    db = await freshDatabase({ name: 'pglite' });
  });
  afterAll(async () => {
    for (const q of open) await q.close(1000).catch(() => {});
    await disposeDatabase(db);
  });

  it('a job enqueued in this process runs at once, and so does the next after another idle spell', async () => {
    const ran: number[] = [];
    const { q, queue } = await idleConsumer<{ n: number }>(async (d) => void ran.push(d.n));
    await q.enqueue(queue, { n: 1 });
    await within('the first job ran', () => ran.length === 1);
    await sleep(300);
    await q.enqueue(queue, { n: 2 });
    await within('the second job ran', () => ran.length === 2);
    expect(ran).toEqual([1, 2]);
  });

  it('idle polls back off from pollMs to the bound, doubling; a job found resets them', async () => {
    // The real database, its statements counted: each poll is one claim statement.
    const counted = countingClaims(db);
    const q = new DatabaseQueues({ db: counted, prefix: uniqueName('q'), pollMs: 25, idlePollMaxMs: 400 });
    open.push(q);
    const ran: number[] = [];
    const queue = uniqueName('backoff');
    q.process<{ n: number }>(queue, async (d) => void ran.push(d.n));
    await sleep(3000);
    // Without back-off: 3000 / 25 = 120 polls. With it: 25, 50, 100, 200, 400, 400, … ms apart,
    // so 5 + (3000 - 775) / 400 ≈ 11.
    const idle = counted.claims;
    expect(idle).toBeGreaterThanOrEqual(6);
    expect(idle).toBeLessThanOrEqual(16);
    await q.enqueue(queue, { n: 1 });
    await within('the job ran', () => ran.length === 1);
    // Found work: polling starts again from pollMs (25, 50, 100, 200 ms apart: 4 in the next
    // 400 ms, 5 in 600), where the backed-off consumer would have polled once or twice.
    const before = counted.claims;
    await sleep(600);
    expect(counted.claims - before).toBeGreaterThanOrEqual(3);
  });

  it('the default bound is 10 × pollMs on the embedded database', async () => {
    const counted = countingClaims(db);
    expect(counted.kind).toBe('pglite');
    const q = new DatabaseQueues({ db: counted, prefix: uniqueName('q'), pollMs: 40 });
    open.push(q);
    q.process(uniqueName('default'), async () => {});
    await sleep(3000);
    // 40, 80, 160, 320, 400, 400, … ms apart: 5 + (3000 - 600) / 400 = 11; without back-off 75;
    // with a bound of 5 s, 7.
    expect(counted.claims).toBeGreaterThanOrEqual(8);
    expect(counted.claims).toBeLessThanOrEqual(15);
  });

  it('a delayed job runs at its time, not at the next backed-off poll', async () => {
    const ran: number[] = [];
    const { q, queue } = await idleConsumer<{ n: number }>(async (d) => void ran.push(d.n));
    const t0 = Date.now();
    await q.enqueue(queue, { n: 1 }, { delayMs: 1000 });
    // A later, earlier-due job too: each keeps its own wake-up.
    await q.enqueue(queue, { n: 2 }, { delayMs: 300 });
    await within('both delayed jobs ran', () => ran.length === 2);
    expect(ran).toEqual([2, 1]);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1000);
  });

  it("a retry runs after its backoff although the job's completion woke a poll in between", async () => {
    const attempts: number[] = [];
    const { q, queue } = await idleConsumer<Record<string, never>>(async (_d, attempt) => {
      attempts.push(attempt);
      if (attempt < 3) throw new Error(`attempt ${attempt} fails`);
    });
    await q.enqueue(queue, {}, { attempts: 3, backoffMs: [400, 800] });
    await within('completed on the third attempt', async () => (await q.counts(queue)).completed === 1);
    expect(attempts).toEqual([1, 2, 3]);
  });
});
