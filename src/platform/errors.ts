/**
 * The one catalogue of coded errors. Every error a client sees is an RFC 9457 problem
 * (`application/problem+json`) with `type`, `title`, `status`, `detail`, a stable `code`, and
 * `errors[]` for field-level validation. Domain code throws AppError (or a domain error that the
 * error handler maps here); the HTTP layer never invents statuses elsewhere.
 */

export interface FieldIssue {
  /** JSON Pointer into the request: `/body/boundary/coordinates/0`, `/query/per_page`. */
  path: string;
  code?: string;
  message: string;
}

export const problemCatalog = {
  validation_failed: { status: 400, title: 'The request is invalid' },
  malformed_json: { status: 400, title: 'The request body is not valid JSON' },
  invalid_boundary: { status: 400, title: 'The field boundary is invalid' },
  invalid_formula: { status: 400, title: 'The formula is invalid' },
  invalid_imagery: { status: 400, title: 'The imagery cannot be registered' },
  malformed_request: { status: 400, title: 'The request is not valid HTTP' },
  unauthorized: { status: 401, title: 'Missing or invalid API key' },
  forbidden: { status: 403, title: 'Forbidden' },
  not_found: { status: 404, title: 'Resource not found' },
  route_not_found: { status: 404, title: 'No such route' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  request_timeout: { status: 408, title: 'The request took too long to arrive' },
  conflict: { status: 409, title: 'Conflict' },
  payload_too_large: { status: 413, title: 'The request body is too large' },
  uri_too_long: { status: 414, title: 'The URL is too long' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  unprocessable: { status: 422, title: 'The request cannot be processed' },
  rate_limited: { status: 429, title: 'Too many requests' },
  headers_too_large: { status: 431, title: 'The request headers are too large' },
  internal_error: { status: 500, title: 'Internal server error' },
  service_unavailable: { status: 503, title: 'Service unavailable' },
} as const satisfies Record<string, { status: number; title: string }>;

export type ProblemCode = keyof typeof problemCatalog | (string & {});

export class AppError extends Error {
  readonly status: number;
  readonly title: string;
  constructor(
    readonly code: ProblemCode,
    readonly detail: string,
    opts: { status?: number; title?: string; errors?: FieldIssue[]; headers?: Record<string, string>; extra?: Record<string, unknown> } = {},
  ) {
    super(detail);
    this.name = 'AppError';
    const known = (problemCatalog as Record<string, { status: number; title: string }>)[code];
    this.status = opts.status ?? known?.status ?? 400;
    this.title = opts.title ?? known?.title ?? 'Request failed';
    this.errors = opts.errors;
    this.headers = opts.headers;
    this.extra = opts.extra;
  }
  readonly errors?: FieldIssue[];
  readonly headers?: Record<string, string>;
  readonly extra?: Record<string, unknown>;
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  instance?: string;
  request_id?: string;
  errors?: FieldIssue[];
  [k: string]: unknown;
}

/** `type` is a relative URI reference resolved against the service: GET /problems/{code} explains it. */
export function problemType(code: string): string {
  return `/problems/${code}`;
}

export function toProblem(err: AppError, requestId?: string, instance?: string): Problem {
  return {
    type: problemType(err.code),
    title: err.title,
    status: err.status,
    detail: err.detail,
    code: err.code,
    ...(instance ? { instance } : {}),
    ...(requestId ? { request_id: requestId } : {}),
    ...(err.errors ? { errors: err.errors } : {}),
    ...(err.extra ?? {}),
  };
}

export const notFound = (what: string, id: string): AppError => new AppError('not_found', `${what} ${id} does not exist`);
