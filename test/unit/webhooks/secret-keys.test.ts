/**
 * Where the key that seals webhook secrets comes from (SECRETS_KEY, DATA_DIR/secrets.key created
 * with mode 0600, or the signing key with a loud warning when DATABASE_URL is set), and a box that
 * still opens what earlier keys sealed.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/platform/config.js';
import { resolveSecretKeys, type SecretKeySource } from '../../../src/webhooks/secret-keys.js';
import { SecretBox } from '../../../src/webhooks/signing.js';

const SIGNING = 's'.repeat(40);
const CONFIGURED = 'c'.repeat(40);

describe('the key that seals webhook secrets', () => {
  let dir: string;
  let warnings: string[];
  const source = (o: Partial<SecretKeySource> = {}): SecretKeySource => ({
    previous: [],
    keyFile: path.join(dir, 'secrets.key'),
    createKeyFile: false,
    signingKey: SIGNING,
    externalDatabase: false,
    warn: (m) => warnings.push(m),
    ...o,
  });
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'secret-keys-'));
    warnings = [];
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('SECRETS_KEY wins; the signing key and SECRETS_KEY_PREVIOUS stay readable', () => {
    const keys = resolveSecretKeys(
      source({ configured: CONFIGURED, previous: ['p'.repeat(40)], externalDatabase: true }),
    );
    expect(keys).toEqual({ current: CONFIGURED, previous: ['p'.repeat(40), SIGNING], source: 'SECRETS_KEY' });
    expect(warnings).toEqual([]);
  });

  it('with the embedded database: a key file beside the data, mode 0600, created once and then read', () => {
    const first = resolveSecretKeys(source({ createKeyFile: true }));
    expect(first.source).toBe('key file');
    expect(first.current).not.toBe(SIGNING);
    expect(first.current.length).toBeGreaterThanOrEqual(32);
    expect(first.previous).toEqual([SIGNING]);
    expect(statSync(path.join(dir, 'secrets.key')).mode & 0o777).toBe(0o600);
    expect(readFileSync(path.join(dir, 'secrets.key'), 'utf8').trim()).toBe(first.current);
    expect(resolveSecretKeys(source({ createKeyFile: true })).current).toBe(first.current);
    expect(warnings).toEqual([]);
  });

  it('with DATABASE_URL and neither SECRETS_KEY nor a key file: the signing key, and a loud warning', () => {
    const keys = resolveSecretKeys(source({ externalDatabase: true }));
    expect(keys).toMatchObject({ current: SIGNING, source: 'signing key' });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/WARNING: SECRETS_KEY is not set and DATABASE_URL is/);
    expect(warnings[0]).toContain(path.join(dir, 'secrets.key'));
  });

  it('with DATABASE_URL a key file an operator placed is used, and a readable one is warned about', () => {
    writeFileSync(path.join(dir, 'secrets.key'), `${'f'.repeat(40)}\n`, { mode: 0o644 });
    chmodSync(path.join(dir, 'secrets.key'), 0o644);
    const keys = resolveSecretKeys(source({ externalDatabase: true }));
    expect(keys).toMatchObject({ current: 'f'.repeat(40), source: 'key file' });
    expect(warnings).toEqual([expect.stringMatching(/readable by others \(mode 644\): chmod 600/)]);
  });

  it('SECRETS_KEY_PREVIOUS is a comma-separated list of keys of at least 32 characters', () => {
    expect(loadConfig({ SECRETS_KEY_PREVIOUS: `${'a'.repeat(32)}, ${'b'.repeat(32)}` }).secretsKeyPrevious).toEqual([
      'a'.repeat(32),
      'b'.repeat(32),
    ]);
    expect(loadConfig({}).secretsKeyPrevious).toEqual([]);
    expect(() => loadConfig({ SECRETS_KEY_PREVIOUS: 'short' })).toThrow(/SECRETS_KEY_PREVIOUS/);
  });

  it('a box opens what the current and the earlier keys sealed, and tells which need re-sealing', () => {
    const old = new SecretBox(SIGNING).seal('whsec_old');
    const box = new SecretBox(CONFIGURED, [SIGNING]);
    const fresh = box.seal('whsec_new');
    expect(box.open(old)).toBe('whsec_old');
    expect(box.open(fresh)).toBe('whsec_new');
    expect(box.isCurrent(old)).toBe(false);
    expect(box.isCurrent(fresh)).toBe(true);
    // The signing key alone (what a database dump holds) no longer opens a fresh value.
    expect(() => new SecretBox(SIGNING).open(fresh)).toThrow(/neither the current/);
  });
});
