/**
 * Turns every failure into a problem+json body: AppError, Fastify's own errors (validation,
 * 404, 415, 413, malformed JSON), and anything unexpected (an opaque 500, logged with the request
 * id that the response also carries).
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  AppError,
  problemCatalog,
  problemCodes,
  problemOf,
  toProblem,
  UncataloguedStatusError,
  type DomainProblemTable,
  type FieldIssue,
} from '../errors.js';
import { backendUnavailable } from '../unavailable.js';

export { backendUnavailable };

interface AjvIssue {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: Record<string, unknown>;
}

const CONTEXT_PATH: Record<string, string> = {
  body: '/body',
  querystring: '/query',
  params: '/path',
  headers: '/headers',
};

/**
 * `data`: what was validated, when known. A query parameter given more than once arrives as an
 * array (`?percentiles=5&percentiles=95`), and ajv's "must be string" would not say why: such an
 * issue names the repetition instead (code `repeated`), since every list in a query is one
 * comma-separated value.
 */
export function validationIssues(context: string, issues: AjvIssue[], data?: unknown): FieldIssue[] {
  const base = CONTEXT_PATH[context] ?? `/${context}`;
  const out: FieldIssue[] = [];
  const seen = new Set<string>();
  // A union of literals (Type.Union of Type.Literal) fails one `const` per branch at the same
  // path: name the values they allow instead of ajv's "must be equal to constant".
  // (Only where every branch is a literal: a union with an object or an array keeps ajv's first.)
  const literals = new Map<string, unknown[]>();
  const mixed = new Set<string>();
  for (const v of issues) {
    const at = base + (v.instancePath ?? '');
    if (v.keyword === 'const' && v.params && 'allowedValue' in v.params)
      literals.set(at, [...(literals.get(at) ?? []), v.params.allowedValue]);
    else if (v.keyword !== 'anyOf' && v.keyword !== 'oneOf') mixed.add(at);
  }
  for (const at of mixed) literals.delete(at);
  // A nullable list or object (Type.Union([X, Type.Null()])) whose item failed also fails the null
  // branch at the member itself: "must be null" beside "/0 must be integer" only misleads.
  const failedWithin = (at: string) =>
    issues.some(
      (w) => w.keyword !== 'anyOf' && w.keyword !== 'oneOf' && (base + (w.instancePath ?? '')).startsWith(`${at}/`),
    );
  for (const v of issues) {
    let p = base + (v.instancePath ?? '');
    // (and the union's own "must match a schema in anyOf" there, which says less than the item)
    if (
      ((v.keyword === 'type' && v.params?.type === 'null') || v.keyword === 'anyOf' || v.keyword === 'oneOf') &&
      failedWithin(p)
    )
      continue;
    let message = v.message ?? 'is invalid';
    let code = v.keyword ?? 'invalid';
    const given = repeatedQueryValue(context, v, data);
    if (given) {
      message = `is given ${given} times: give it once (a list is one comma-separated value, as in name=a,b)`;
      code = 'repeated';
    } else if (v.keyword === 'required' && v.params?.missingProperty) {
      p += `/${String(v.params.missingProperty)}`;
      message = 'is required';
    } else if (v.keyword === 'additionalProperties' && v.params?.additionalProperty) {
      p += `/${String(v.params.additionalProperty)}`;
      message = 'is not a known property';
    } else if (v.keyword === 'enum' && Array.isArray(v.params?.allowedValues)) {
      message = `must be one of: ${(v.params!.allowedValues as unknown[]).join(', ')}`;
    } else if (v.keyword === 'const' && literals.has(p)) {
      const values = literals.get(p)!;
      message = values.length === 1 ? `must be ${JSON.stringify(values[0])}` : `must be one of: ${values.join(', ')}`;
    }
    // anyOf/oneOf report every branch; one message per member is what a person can act on.
    if (seen.has(p)) continue;
    seen.add(p);
    out.push({ path: p, code, message });
  }
  return out;
}

/** How many times a query parameter with an issue was given, when more than once (any keyword: a union of literals fails `const`). */
function repeatedQueryValue(context: string, v: AjvIssue, data: unknown): number | undefined {
  if (context !== 'querystring' || !data || typeof data !== 'object') return undefined;
  const name = /^\/([^/]+)$/
    .exec(v.instancePath ?? '')?.[1]
    ?.replace(/~1/g, '/')
    .replace(/~0/g, '~');
  const value = name === undefined ? undefined : (data as Record<string, unknown>)[name];
  return Array.isArray(value) && value.length > 1 ? value.length : undefined;
}

export function describeIssues(issues: FieldIssue[]): string {
  const first = issues.slice(0, 3).map((i) => `${i.path} ${i.message}`);
  return first.join('; ') + (issues.length > 3 ? ` (and ${issues.length - 3} more)` : '');
}

function mapFastifyError(err: FastifyError, domain: DomainProblemTable, query?: unknown): AppError {
  const problem = problemOf(err, domain);
  if (problem) return problem;
  if (err.validation) {
    const context = err.validationContext ?? 'body';
    const issues = validationIssues(
      context,
      err.validation as AjvIssue[],
      context === 'querystring' ? query : undefined,
    );
    return new AppError('validation_failed', describeIssues(issues), { errors: issues });
  }
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError('unsupported_media_type', 'Request bodies must be JSON: send Content-Type: application/json');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('payload_too_large', 'The request body is larger than this endpoint accepts');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new AppError(
        'malformed_json',
        'The body is empty but Content-Type says JSON; send a JSON object or no Content-Type',
      );
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new AppError('malformed_json', `The body is not valid JSON: ${err.message}`);
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new AppError('validation_failed', 'Content-Length does not match the body');
  }
  if (err instanceof SyntaxError && err.statusCode === 400) {
    return new AppError('malformed_json', `The body is not valid JSON: ${err.message}`);
  }
  if (backendUnavailable(err)) {
    return new AppError(
      'service_unavailable',
      'A backing service (database or queue) is not reachable right now; retry shortly',
      { headers: { 'Retry-After': '2' } },
    );
  }
  const status = err.statusCode ?? 500;
  if (status === 429) return new AppError('rate_limited', err.message || 'Rate limit exceeded');
  if (status === 503) return new AppError('service_unavailable', err.message || 'Service unavailable');
  if (status >= 400 && status < 500) {
    const code = problemCodes.find((c) => problemCatalog[c].status === status);
    return code ? new AppError(code, err.message) : new UncataloguedStatusError(status, err.message);
  }
  return new AppError('internal_error', 'An unexpected error occurred; quote the request id when reporting it');
}

export function sendProblem(reply: FastifyReply, request: FastifyRequest, err: AppError): FastifyReply {
  if (err.headers) reply.headers(err.headers);
  return reply
    .code(err.status)
    .type('application/problem+json')
    .send(toProblem(err, request.id, request.url.split('?')[0]));
}

/** `domain`: how the composition turns domain errors into problems (src/problem-map.ts). */
export function registerProblemHandlers(app: FastifyInstance, domain: DomainProblemTable = []): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const mapped = mapFastifyError(error, domain, request.query);
    if (mapped.status >= 500) {
      request.log.error({ err: error, reqId: request.id }, 'request failed');
    } else {
      request.log.info({ code: mapped.code, status: mapped.status }, 'request rejected');
    }
    return sendProblem(reply, request, mapped);
  });
  // A path that a route serves under other methods answers 405 with Allow (RFC 9110 15.5.6), not
  // 404: the resource exists. Every route registered after this hook is recorded as a pattern.
  const routes: Array<{ pattern: RegExp; methods: string[] }> = [];
  app.addHook('onRoute', (route) => {
    const methods = ([] as string[]).concat(route.method);
    routes.push({ pattern: routePattern(route.url), methods });
  });
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0]!;
    const allowed = [...new Set(routes.filter((r) => r.pattern.test(path)).flatMap((r) => r.methods))].sort();
    // A route of this very method that calls callNotFound (an unknown problem code) is a 404.
    if (allowed.length && !allowed.includes(request.method))
      return sendProblem(
        reply,
        request,
        new AppError('method_not_allowed', `${path} answers ${allowed.join(', ')}, not ${request.method}`, {
          headers: { allow: allowed.join(', ') },
        }),
      );
    return sendProblem(reply, request, new AppError('route_not_found', `No route ${request.method} ${path}`));
  });
}

/** A route's URL (`/v1/fields/:id/indices/tiles/:z/:x/:y.png`, `/demo/stac/*`) as a regular expression of paths. */
export function routePattern(url: string): RegExp {
  const source = url
    .split(/(:[A-Za-z0-9_]+|\*)/)
    .map((part) => {
      if (part === '*') return '.*';
      if (/^:[A-Za-z0-9_]+$/.test(part)) return '[^/]+';
      return part.replace(/[.+?^${}()|[\]\\]/g, '\\$&');
    })
    .join('');
  return new RegExp(`^${source}/?$`);
}
