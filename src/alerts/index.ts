/** The alerts feature's public entry. */
export { MIN_VALID_FRACTION } from './service.js';
