/** The imagery feature's public entry: captures as other features see them, CRS helpers, linking. */
export { fromWgs84, toWgs84, type CrsRef } from './crs.js';
export {
  FieldSnapshot,
  linkFieldImagery,
  registerImagery,
  type ImageryDeps,
  type StacOrigin,
} from './service.js';
export { captureFromStac, EARTH_SEARCH_ASSET_KEYS } from './stac.js';
export type { ImageryCreate } from './schemas.js';
export { coverageGroups, MAX_PIXELS as MAX_GROUP_PIXELS, type GridInfo } from './coverage-groups.js';
export { CAPTURE_BANDS, coverageBands, SCL_MASKED, type CaptureSource } from './window-reader.js';
export { demoStacUrl } from './demo-catalogue.js';
export { gridKey, windowLonLatBounds } from './web-mercator.js';
