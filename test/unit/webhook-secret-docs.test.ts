/**
 * The README states the webhook secret rules where it shows registration, and they are the ones
 * the route enforces (src/webhooks/schemas.ts).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/platform/paths.js';
import { WebhookCreate } from '../../src/webhooks/schemas.js';

describe('webhook secret rules in the README', () => {
  it('the registration example is followed by the secret length the schema enforces', () => {
    const readme = readFileSync(path.join(packageRoot, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('### Webhooks'), readme.indexOf('Every delivery is a POST'));
    expect(section).toMatch(/curl -s -X POST \$API\/webhooks/);
    const { minLength, maxLength } = WebhookCreate.properties.secret as unknown as { minLength: number; maxLength: number };
    expect(section.replace(/\s+/g, ' ')).toContain(`must be ${minLength} to ${maxLength} characters long`);
    expect(section).toContain('400 validation_failed');
  });
});
