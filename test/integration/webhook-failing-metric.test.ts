/**
 * webhook_endpoints_failing counts the active webhooks whose last 3 or more delivery attempts all
 * failed (consecutive_failures), read from the database at scrape time, on every backend.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findOrCreateAccount } from '../../src/accounts/api-keys.js';
import type { Database } from '../../src/platform/database.js';
import { newId } from '../../src/platform/ids.js';
import { registry } from '../../src/platform/metrics.js';
import { observeFailingEndpoints } from '../../src/webhooks/metrics.js';
import { dbBackends, disposeDatabase, freshDatabase } from '../helpers/backends.js';
import { metricSum, parseMetrics } from '../helpers/processes.js';

const failing = async () => metricSum(parseMetrics(await registry.metrics()), 'webhook_endpoints_failing');

describe.each(dbBackends)('webhook_endpoints_failing on $name', (backend) => {
  let db: Database;
  let accountId: string;
  beforeAll(async () => {
    db = await freshDatabase(backend);
    accountId = (await findOrCreateAccount(db, 'failing-metric')).id;
  });
  afterAll(async () => {
    if (db) await disposeDatabase(db);
  });

  const addWebhook = async (failures: number, status = 'active') => {
    const id = newId('wh');
    await db.query(
      `INSERT INTO webhooks (id, account_id, url, events, secret_sealed, status, consecutive_failures)
       VALUES ($1, $2, 'https://example.test/h', $3, 'x', $4, $5)`,
      [id, accountId, ['*'], status, failures],
    );
    return id;
  };

  it('counts active webhooks at 3 or more failures in a row, not disabled or healthier ones', async () => {
    const stop = observeFailingEndpoints(db);
    try {
      expect(await failing()).toBe(0);
      await addWebhook(0);
      await addWebhook(2);
      const three = await addWebhook(3);
      await addWebhook(4);
      await addWebhook(7, 'disabled');
      expect(await failing()).toBe(2);
      // A success resets the webhook's count: it no longer counts.
      await db.query(`UPDATE webhooks SET consecutive_failures = 0 WHERE id = $1`, [three]);
      expect(await failing()).toBe(1);
    } finally {
      stop();
    }
  });
});
