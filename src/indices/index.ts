/** The indices feature's public entry: choosing captures and the time series, for reports and batch jobs. */
export { chooseCapture, fieldCaptures, loadCaptures, resolveProgram } from './service.js';
export {
  chooseIntervals,
  indexTimeSeries,
  intervalBounds,
  MAX_INTERVALS,
  seriesElements,
  seriesRange,
  usedCaptureIds,
  type SeriesElement,
} from './timeseries.js';
export {
  DEFAULT_OPTIONS,
  DEFAULT_SCL_EXCLUDE,
  parseStatsOptions,
  type RawStatsOptions,
  type StatsOptions,
} from './stats-options.js';
export { capturesUnderMask } from './service.js';
export { hasBands, onlyTouched, weighed, type Candidate } from './selection.js';
export { cachedStatsMany, rememberStatsMany, statsHash, toCached } from './stats-store.js';
export { hash as contentHash } from './cache.js';
export type { CachedStats } from './types.js';
