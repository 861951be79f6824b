/** The fields feature's public entry: the boundary type and geometry, and reading a field. */
export { BoundaryError, geodesicAreaHa, validateBoundary, type Boundary } from './boundary.js';
export { createField, getField } from './service.js';
