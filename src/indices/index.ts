/** The indices feature's public entry: choosing captures and the time series, for reports. */
export { chooseCapture, fieldCaptures, loadCaptures } from './service.js';
export { indexTimeSeries } from './timeseries.js';
export {
  DEFAULT_OPTIONS,
  DEFAULT_SCL_EXCLUDE,
  parseStatsOptions,
  type RawStatsOptions,
  type StatsOptions,
} from './stats-options.js';
export { capturesUnderMask } from './service.js';
