/**
 * Webhook secrets at rest are sealed with a key kept outside the database: a dump of the database
 * (which holds the signing key when SIGNING_KEY is not configured) no longer opens them. Secrets
 * sealed by earlier versions (under the signing key) are re-sealed at start and keep working;
 * rotating SECRETS_KEY with SECRETS_KEY_PREVIOUS moves them again. On both database backends, and
 * with the embedded database on disk, whose key file sits beside it with mode 0600.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findOrCreateAccount } from '../../src/accounts/api-keys.js';
import { loadConfig } from '../../src/platform/config.js';
import type { Database } from '../../src/platform/database.js';
import { newId } from '../../src/platform/ids.js';
import { openRuntime } from '../../src/runtime.js';
import { resolveSigningKey } from '../../src/platform/settings.js';
import { generateSecret, SecretBox } from '../../src/webhooks/signing.js';
import { dbBackends, disposeDatabase, freshDatabase, uniqueName } from '../helpers/backends.js';

const KEY_1 = 'first-secrets-key-0123456789abcdef0123';
const KEY_2 = 'second-secrets-key-0123456789abcdef012';
const baseEnv = { COMPUTE_THREADS: '1', SHED_POOL_QUEUE: '0', PUBLIC_BASE_URL: 'http://localhost:3000' };

async function sealedOf(db: Database, id: string): Promise<string> {
  return (await db.query<{ secret_sealed: string }>('SELECT secret_sealed FROM webhooks WHERE id = $1', [id]))[0]!
    .secret_sealed;
}

describe.each(dbBackends)('webhook secrets at rest on $name', (backend) => {
  let db: Database;
  let dbSigningKey: string;
  const secret = generateSecret();
  const id = newId('wh');

  beforeAll(async () => {
    db = await freshDatabase(backend);
    // As an earlier version left it: SIGNING_KEY not configured, so the signing key is in the
    // database, and the secret is sealed under a key derived from it.
    dbSigningKey = await resolveSigningKey(db, undefined);
    const account = await findOrCreateAccount(db, 'acme');
    await db.query(
      `INSERT INTO webhooks (id, account_id, url, events, secret_sealed, status) VALUES ($1, $2, 'https://example.com/h', $3, $4, 'active')`,
      [id, account.id, ['*'], new SecretBox(dbSigningKey).seal(secret)],
    );
    expect(new SecretBox(dbSigningKey).open(await sealedOf(db, id))).toBe(secret);
  });
  afterAll(async () => disposeDatabase(db));

  const open = async (env: Record<string, string>) => {
    const logged: string[] = [];
    const runtime = await openRuntime(loadConfig({ ...baseEnv, ...env }), {
      db,
      queuePrefix: uniqueName('q'),
      pollMs: 50,
      log: (m) => logged.push(m),
    });
    return { runtime, logged };
  };

  it('with SECRETS_KEY the old secret is re-sealed: it still opens, and the database alone no longer opens it', async () => {
    const { runtime, logged } = await open({ SECRETS_KEY: KEY_1 });
    try {
      const sealed = await sealedOf(db, id);
      expect(runtime.webhooks.box.open(sealed)).toBe(secret);
      expect(() => new SecretBox(dbSigningKey).open(sealed)).toThrow();
      expect(new SecretBox(KEY_1).open(sealed)).toBe(secret);
      expect(logged).toContain('webhook secrets: 1 re-sealed under the SECRETS_KEY');
      expect(logged.join('\n')).not.toMatch(/WARNING/);
    } finally {
      await runtime.close();
    }
  });

  it('rotation: a new SECRETS_KEY with the old one in SECRETS_KEY_PREVIOUS moves every secret to the new key', async () => {
    const { runtime } = await open({ SECRETS_KEY: KEY_2, SECRETS_KEY_PREVIOUS: KEY_1 });
    try {
      const sealed = await sealedOf(db, id);
      expect(new SecretBox(KEY_2).open(sealed)).toBe(secret);
      expect(() => new SecretBox(KEY_1).open(sealed)).toThrow();
    } finally {
      await runtime.close();
    }
    // Once moved, the previous key is no longer needed.
    const again = await open({ SECRETS_KEY: KEY_2 });
    expect(again.runtime.webhooks.box.open(await sealedOf(db, id))).toBe(secret);
    await again.runtime.close();
  });

  it.runIf(backend.name === 'postgres')(
    'on PostgreSQL without SECRETS_KEY or a key file, start-up warns loudly',
    async () => {
      const { runtime, logged } = await open({ DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'nokey-')) });
      await runtime.close();
      expect(logged.join('\n')).toMatch(/WARNING: SECRETS_KEY is not set and DATABASE_URL is/);
    },
  );
});

describe('the embedded database on disk', () => {
  let dataDir: string;
  beforeAll(() => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'embedded-key-'));
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('keeps its key in DATA_DIR/secrets.key (0600), not in the database, and reads it again at the next start', async () => {
    const config = loadConfig({ ...baseEnv, DATA_DIR: dataDir, DEV_BOOTSTRAP: 'false' });
    const secret = generateSecret();
    const id = newId('wh');
    let first = await openRuntime(config, { pollMs: 50, log: () => {} });
    let signingKey: string;
    try {
      const account = await findOrCreateAccount(first.db, 'acme');
      await first.db.query(
        `INSERT INTO webhooks (id, account_id, url, events, secret_sealed, status) VALUES ($1, $2, 'https://example.com/h', $3, $4, 'active')`,
        [id, account.id, ['*'], first.webhooks.box.seal(secret)],
      );
      signingKey = first.signingKey;
      const sealed = await sealedOf(first.db, id);
      expect(() => new SecretBox(signingKey).open(sealed)).toThrow();
    } finally {
      await first.close();
    }
    expect(statSync(path.join(dataDir, 'secrets.key')).mode & 0o777).toBe(0o600);
    first = await openRuntime(config, { pollMs: 50, log: () => {} });
    try {
      expect(first.webhooks.box.open(await sealedOf(first.db, id))).toBe(secret);
    } finally {
      await first.close();
    }
  }, 180_000);
});
