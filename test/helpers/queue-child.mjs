// A worker process for the queue contract's kill test: takes jobs from queue "kill", says so on
// stdout, and hangs until the test SIGKILLs it. Loads the compiled code (npm test builds first).
import { openDatabase } from '../../dist/src/platform/database.js';
import { createJobQueues } from '../../dist/src/platform/queue/job-queues.js';

const { DB_URL, DB_DIR, DB_SCHEMA, REDIS_URL, PREFIX, LEASE_MS } = process.env;
const db = await openDatabase(DB_URL ? { url: DB_URL, schema: DB_SCHEMA } : { dataDir: DB_DIR });
const queues = await createJobQueues({
  db,
  redisUrl: REDIS_URL || undefined,
  prefix: PREFIX,
  leaseMs: Number(LEASE_MS),
  pollMs: 50,
});
queues.process('kill', async (data, ctx) => {
  process.stdout.write(`started ${ctx.id} ${JSON.stringify(data)}\n`);
  await new Promise(() => {});
});
process.stdout.write('ready\n');
