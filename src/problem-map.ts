/**
 * The one table from domain errors to problems. Domain code (formula parser, boundary checks,
 * local paths, outbound URLs, imagery decoding) throws its own errors and knows nothing of HTTP;
 * a feature that knows where the input came from wraps the error in RefusedInput with the
 * request's JSON Pointer. The error handler (platform/http/problems.ts) looks the error up here.
 * It lives beside app.ts because it names feature and compute classes, which platform/ may not.
 *
 * CrsError and the decode-limit errors (ImageryLimitError, BlockDecodeError) are raised inside the
 * compute workers and cross the thread boundary as `band: [code] reason` text; the registration
 * turns that text back into an ImageryError (imagery/service.ts fromWorker), answered here.
 */
import { FormulaError } from './compute/formula.js';
import { BoundaryError } from './fields/boundary.js';
import { LocalPathError } from './imagery/local-path.js';
import { imageryIssue } from './imagery/service.js';
import { ImageryError } from './imagery/window-reader.js';
import { AppError, domainProblem, type DomainProblemTable } from './platform/errors.js';
import { OutboundError } from './platform/net/target.js';

/** invalid_imagery with one field-level issue. */
function imageryProblem(path: string, code: string, message: string): AppError {
  return new AppError('invalid_imagery', message, { errors: [{ path, code, message }] });
}

/** The last segment of a JSON Pointer: `/body/bands/B04` → `B04`. */
const lastSegment = (path: string) => path.slice(path.lastIndexOf('/') + 1);

export const domainProblems: DomainProblemTable = [
  domainProblem(
    FormulaError,
    (err, path = '/body/formula') =>
      new AppError('invalid_formula', err.message, {
        errors: [{ path, code: err.code, message: err.message }],
        extra: { position: err.position },
      }),
  ),
  domainProblem(BoundaryError, (err) => {
    const issues = err.issues.map((i) => ({ path: i.path, code: i.code, message: i.message }));
    return new AppError(
      'invalid_boundary',
      issues
        .map((i) => `${i.path}: ${i.message}`)
        .slice(0, 3)
        .join('; '),
      { errors: issues },
    );
  }),
  domainProblem(LocalPathError, (err, path = '/body') =>
    imageryProblem(
      path,
      err.kind === 'outside' ? 'path_not_allowed' : 'file_not_found',
      `${lastSegment(path)}: ${err.message}`,
    ),
  ),
  domainProblem(ImageryError, (err, path = '/body') => {
    const { code, message } = imageryIssue(err);
    return imageryProblem(path, code, message);
  }),
  domainProblem(OutboundError, (err, path = '/body/url') => {
    const code =
      err.kind === 'invalid_url'
        ? 'invalid_url'
        : err.kind === 'blocked_address'
          ? 'blocked_address'
          : 'unresolvable_host';
    const message = `${lastSegment(path)} ${err.message}`;
    return new AppError('validation_failed', message, { errors: [{ path, code, message }] });
  }),
];
