/**
 * The one catalogue of coded errors. Every error a client sees is an RFC 9457 problem
 * (`application/problem+json`) with `type`, `title`, `status`, `detail`, a stable `code`, and
 * `errors[]` for field-level validation. Every `code` is declared here once, with its status and
 * title (`ProblemCode` is closed: tsc refuses an undeclared one), and GET /problems/{code} serves it.
 * Feature code throws AppError; framework-free domain code throws its own errors (FormulaError,
 * BoundaryError, ...), which the composition's table (src/problem-map.ts) turns into problems in
 * the error handler: this layer names no domain class.
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
  range_not_satisfiable: { status: 416, title: 'The requested range is not satisfiable' },
  unprocessable: { status: 422, title: 'The request cannot be processed' },
  // Features' own codes (indices, webhooks, reports).
  no_imagery: { status: 404, title: 'No imagery for the field' },
  invalid_signature: { status: 403, title: 'Invalid download link' },
  link_expired: { status: 403, title: 'Download link expired' },
  webhook_limit_reached: { status: 409, title: 'Too many webhooks' },
  alert_limit_reached: { status: 409, title: 'Too many alert rules' },
  webhook_disabled: { status: 409, title: 'Webhook disabled' },
  imagery_does_not_cover_field: { status: 422, title: 'The imagery does not cover the field' },
  missing_bands: { status: 422, title: 'No imagery with the bands the index reads' },
  no_usable_imagery: { status: 422, title: 'No capture with a usable pixel over the field' },
  webhook_test_failed: { status: 422, title: 'The webhook test delivery failed' },
  idempotency_key_reused: { status: 422, title: 'The Idempotency-Key belongs to another request' },
  rate_limited: { status: 429, title: 'Too many requests' },
  headers_too_large: { status: 431, title: 'The request headers are too large' },
  internal_error: { status: 500, title: 'Internal server error' },
  service_unavailable: { status: 503, title: 'Service unavailable' },
} as const satisfies Record<string, { status: number; title: string }>;

export type ProblemCode = keyof typeof problemCatalog;

export const problemCodes = Object.keys(problemCatalog) as ProblemCode[];

export function isProblemCode(code: string): code is ProblemCode {
  return Object.hasOwn(problemCatalog, code);
}

export interface ProblemOptions {
  errors?: FieldIssue[];
  headers?: Record<string, string>;
  /** Members added to the problem body (`missing_bands`, `position`, `test_delivery`). */
  extra?: Record<string, unknown>;
}

/** A problem to answer: status and title come from the catalogue, never from the throw site. */
export class AppError extends Error {
  readonly status: number;
  readonly title: string;
  constructor(
    readonly code: ProblemCode,
    readonly detail: string,
    opts: ProblemOptions = {},
  ) {
    super(detail);
    this.name = 'AppError';
    this.status = problemCatalog[code].status;
    this.title = problemCatalog[code].title;
    this.errors = opts.errors;
    this.headers = opts.headers;
    this.extra = opts.extra;
  }
  readonly errors?: FieldIssue[];
  readonly headers?: Record<string, string>;
  readonly extra?: Record<string, unknown>;
}

/**
 * The one exception to "status from the catalogue": Fastify or a plugin refused with a 4xx that no
 * code declares (406 from @fastify/multipart, 416 from a range): its status is kept, under the
 * generic code, rather than turned into a 400 or a 500.
 */
export class UncataloguedStatusError extends AppError {
  override readonly status: number;
  constructor(status: number, detail: string) {
    super('validation_failed', detail);
    this.status = status;
  }
}

/** `400 validation_failed` with these issues, each in the detail as `path message`. */
export function validationFailed(issues: FieldIssue[]): AppError {
  return new AppError('validation_failed', issues.map((i) => `${i.path} ${i.message}`).join('; '), { errors: issues });
}

/**
 * A domain error refused the part of the request at `path` (a JSON Pointer such as
 * `/query/formula`): the feature knows where the input came from, the domain code does not.
 */
export class RefusedInput extends Error {
  constructor(
    readonly error: Error,
    readonly path: string,
  ) {
    super(error.message);
    this.name = 'RefusedInput';
  }
}

// biome-ignore lint/suspicious/noExplicitAny: a constructor of any parameters (unknown[] would refuse most classes)
type ErrorClass<E extends Error> = abstract new (...args: any[]) => E;

/** One row of the domain table: errors of `error` (or a subclass) become `problem(err, path)`. */
export interface DomainProblem<E extends Error = Error> {
  error: ErrorClass<E>;
  problem(err: E, path: string | undefined): AppError;
}

/** Rows of different error types in one array, each row checked against its own class. */
export function domainProblem<E extends Error>(
  error: ErrorClass<E>,
  problem: (err: E, path: string | undefined) => AppError,
): DomainProblem {
  return { error, problem } as unknown as DomainProblem;
}

export type DomainProblemTable = readonly DomainProblem[];

/** The problem for an error thrown by a request, or null when it is neither ours nor in the table. */
export function problemOf(err: unknown, table: DomainProblemTable): AppError | null {
  if (err instanceof AppError) return err;
  const [cause, path] = err instanceof RefusedInput ? [err.error, err.path] : [err, undefined];
  const row = table.find((r) => cause instanceof r.error);
  return row ? row.problem(cause as Error, path) : null;
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

export const notFound = (what: string, id: string): AppError =>
  new AppError('not_found', `${what} ${id} does not exist`);
