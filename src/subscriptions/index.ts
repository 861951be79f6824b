/**
 * The subscriptions feature's public entry: the default subscription every account gets, and the
 * demo account's subscription to the demo catalogue.
 */
export { subscribeToDemo } from './demo.js';
export { ensureDefaultSubscriptions } from './service.js';
