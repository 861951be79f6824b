// A report worker process for the kill test: the real runtime (ROLE=worker) on the given database
// and queues, which stops for good when a report reaches its rendering stage and says so on stdout,
// so that the test can SIGKILL it mid-generation. Loads the compiled code (npm test builds first).
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
  reportStage: async (stage, id) => {
    if (stage !== 'render') return;
    process.stdout.write(`mid ${id}\n`);
    await new Promise(() => {});
  },
});
process.stdout.write('ready\n');
