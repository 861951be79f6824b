/**
 * subscription_last_poll_age_seconds: seconds since this process's last poll of a subscription,
 * any outcome; dropped with the subscription's other series when it is no longer polled.
 */
import { describe, expect, it } from 'vitest';
import { registry } from '../../../src/platform/metrics.js';
import { forgetExcept, recordPoll } from '../../../src/subscriptions/metrics.js';
import { parseMetrics } from '../../helpers/processes.js';

const ages = async () =>
  Object.fromEntries(
    parseMetrics(await registry.metrics())
      .filter((s) => s.name === 'subscription_last_poll_age_seconds')
      .map((s) => [s.labels.subscription!, s.value]),
  );

describe('subscription_last_poll_age_seconds', () => {
  it('grows from each poll, whatever its outcome, and goes with forgetExcept', async () => {
    recordPoll('sub_age_a', 'ok', 0.1);
    await new Promise((r) => setTimeout(r, 300));
    recordPoll('sub_age_b', 'error', 0.1);
    const t = await ages();
    expect(t.sub_age_a).toBeGreaterThanOrEqual(0.29);
    expect(t.sub_age_a).toBeLessThan(5);
    expect(t.sub_age_b).toBeGreaterThanOrEqual(0);
    expect(t.sub_age_b).toBeLessThan(t.sub_age_a!);
    recordPoll('sub_age_a', 'rate_limited', 0.1); // a new poll resets it
    expect((await ages()).sub_age_a).toBeLessThan(0.29);
    forgetExcept(new Set(['sub_age_b']));
    expect(Object.keys(await ages())).toEqual(['sub_age_b']);
  });
});
