import type { Config } from '../platform/config.js';
import type { Database } from '../platform/database.js';
import { createApiKey, findOrCreateAccount } from './api-keys.js';

/**
 * On the first start of an empty database, creates the `development` account and returns a key
 * for it (printed once by main). Later starts return null: the key is not stored in plain text.
 */
export async function bootstrapDevelopmentAccount(
  db: Database,
  config?: Pick<Config, 'subscriptions'>,
): Promise<{ account: string; accountId: string; key: string } | null> {
  return db.transaction(async (tx) => {
    await tx.query(`SELECT pg_advisory_xact_lock(hashtext('bootstrap'))`);
    const [{ n }] = (await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM accounts')) as [{ n: number }];
    if (n > 0) return null;
    const account = await findOrCreateAccount(tx, 'development', config);
    const { key } = await createApiKey(tx, account.id, 'development key created on first start');
    return { account: account.name, accountId: account.id, key };
  });
}
