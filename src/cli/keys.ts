/**
 * API key management:
 *   npm run keys -- create --account NAME [--label TEXT]
 *   npm run keys -- list [--account NAME]
 *   npm run keys -- revoke KEY_ID_OR_KEY
 * Uses DATABASE_URL when set, otherwise the embedded database in DATA_DIR (stop the service
 * first: the embedded database allows one process at a time).
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createApiKey, findOrCreateAccount, listApiKeys, revokeApiKey } from '../accounts/api-keys.js';
import { ConfigError, loadConfig } from '../platform/config.js';
import { migrate, openDatabase } from '../platform/database.js';
import { holderOf } from '../platform/embedded-lock.js';

const USAGE = `usage:
  npm run keys -- create --account NAME [--label TEXT]
  npm run keys -- list [--account NAME]
  npm run keys -- revoke KEY_ID_OR_KEY`;

async function run(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { account: { type: 'string' }, label: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  const [command, arg] = positionals;
  if (values.help || !command) {
    console.log(USAGE);
    return command ? 0 : 2;
  }
  const config = loadConfig();
  if (!config.databaseUrl) {
    const holder = holderOf(config.dataDir);
    if (holder) {
      console.error(
        `The service (pid ${holder}) is using the embedded database in ${config.dataDir}; stop it first, or use DATABASE_URL.`,
      );
      return 1;
    }
  }
  const db = await openDatabase(
    config.databaseUrl
      ? { url: config.databaseUrl, maxConnections: 1 }
      : { dataDir: path.join(config.dataDir, 'pgdata') },
  );
  try {
    await migrate(db);
    switch (command) {
      case 'create': {
        if (!values.account) {
          console.error('create needs --account NAME');
          return 2;
        }
        const account = await findOrCreateAccount(db, values.account, config);
        const created = await createApiKey(db, account.id, values.label);
        console.log(
          `account ${account.name} (${account.id})\nkey id ${created.id}\n\n  ${created.key}\n\nStore it now: only its hash is kept.`,
        );
        return 0;
      }
      case 'list': {
        const keys = await listApiKeys(db, values.account);
        if (!keys.length) console.log('no keys');
        for (const k of keys) {
          const state = k.revoked_at ? `revoked ${k.revoked_at.toISOString()}` : 'active';
          const used = k.last_used_at ? k.last_used_at.toISOString() : 'never';
          console.log(
            `${k.id}  ${k.prefix}…  account=${k.account_name}  ${state}  created=${k.created_at.toISOString()}  last_used=${used}${k.label ? `  "${k.label}"` : ''}`,
          );
        }
        return 0;
      }
      case 'revoke': {
        if (!arg) {
          console.error('revoke needs a key id (key_…) or the key itself');
          return 2;
        }
        const ok = await revokeApiKey(db, arg);
        console.log(ok ? 'revoked' : 'no active key matches');
        return ok ? 0 : 1;
      }
      default:
        console.error(`unknown command "${command}"\n${USAGE}`);
        return 2;
    }
  } finally {
    await db.close();
  }
}

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    console.error(err instanceof ConfigError ? err.message : `error: ${(err as Error).message}`);
    process.exit(1);
  },
);
