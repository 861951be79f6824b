/** The subscriptions feature's public entry: the default subscription every account gets. */
export { ensureDefaultSubscriptions } from './service.js';
