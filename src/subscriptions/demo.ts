/**
 * The demo's subscription: the development account subscribed to the demo catalogue the service
 * serves itself (imagery's demo-catalogue.ts, /demo/stac on the API listener), from the first date
 * the demo left to it. Created by the service, so the loopback address is allowed (as for the
 * operator's default subscription); the poller trusts that URL (PollDeps.trustedUrls).
 */
import { demoStacUrl } from '../imagery/index.js';
import type { Config } from '../platform/config.js';
import type { Database } from '../platform/database.js';
import type { Subscription } from './schemas.js';
import { createSubscription } from './service.js';

export function subscribeToDemo(
  db: Database,
  config: Pick<Config, 'host' | 'port' | 'subscriptions'>,
  accountId: string,
  startDate: string,
): Promise<Subscription> {
  return createSubscription(
    { db, allowPrivateNetworks: true, maxPerAccount: config.subscriptions.maxPerAccount },
    accountId,
    { stac_api_url: demoStacUrl(config), start_date: startDate },
  );
}
