/**
 * The docs state the webhook secret rules where they show registration, and they are the ones
 * the route enforces (src/webhooks/schemas.ts).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../../../src/platform/paths.js';
import { WebhookCreate } from '../../../src/webhooks/schemas.js';

describe('webhook secret rules in the README and docs/api.md', () => {
  const { minLength, maxLength } = WebhookCreate.properties.secret as unknown as {
    minLength: number;
    maxLength: number;
  };

  it('the registration example in docs/api.md is followed by the secret length the schema enforces', () => {
    const api = readFileSync(path.join(packageRoot, 'docs', 'api.md'), 'utf8');
    const section = api.slice(api.indexOf('## Webhooks'), api.indexOf('Every delivery is a POST'));
    expect(section).toMatch(/curl -s -X POST \$API\/webhooks/);
    expect(section.replace(/\s+/g, ' ')).toContain(`must be ${minLength} to ${maxLength} characters long`);
    expect(section).toContain('400 validation_failed');
  });

  it("the README's walk-through states the same length where it mentions registration", () => {
    const readme = readFileSync(path.join(packageRoot, 'README.md'), 'utf8').replace(/\s+/g, ' ');
    expect(readme).toContain(`must be ${minLength} to ${maxLength} characters`);
  });
});
