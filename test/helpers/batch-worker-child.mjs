// A batch worker process for the kill test: the real runtime (ROLE=worker) on the given database
// and queues. It stops for good in the middle of two chunks, and says so on stdout: an even chunk
// once its rows are computed (not stored), an odd one once its rows are stored (its queue job not
// yet finished), so that the test can SIGKILL it with one chunk lost and one stored but unacknowledged.
// Loads the compiled code (npm test builds first).
import { openDatabase } from '../../dist/src/platform/database.js';
import { loadConfig } from '../../dist/src/platform/config.js';
import { openRuntime } from '../../dist/src/runtime.js';

const { DB_URL, DB_DIR, DB_SCHEMA, PREFIX } = process.env;
const db = await openDatabase(DB_URL ? { url: DB_URL, schema: DB_SCHEMA } : { dataDir: DB_DIR });
const config = loadConfig({ ...process.env, ROLE: 'worker' });
await openRuntime(config, {
  db,
  queuePrefix: PREFIX,
  pollMs: 50,
  log: () => {},
  batchChunk: async (stage, id, chunk) => {
    if ((stage === 'computed' && chunk % 2 === 0) || (stage === 'stored' && chunk % 2 === 1)) {
      process.stdout.write(`mid ${id} ${chunk} ${stage}\n`);
      await new Promise(() => {});
    }
  },
});
process.stdout.write('ready\n');
