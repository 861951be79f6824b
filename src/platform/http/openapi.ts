/** OpenAPI 3 generated from the route schemas, served at /openapi.json with interactive docs at /docs. */
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { Type } from 'typebox';
import { problemCatalog, type ProblemCode } from '../errors.js';
import type { Api } from './context.js';

const ProblemProperties = {
  type: Type.String(),
  title: Type.String(),
  status: Type.Integer(),
  detail: Type.String(),
  code: Type.String(),
  instance: Type.Optional(Type.String()),
  request_id: Type.Optional(Type.String()),
  errors: Type.Optional(
    Type.Array(Type.Object({ path: Type.String(), code: Type.Optional(Type.String()), message: Type.String() })),
  ),
};

export const Problem = Type.Object(ProblemProperties, {
  additionalProperties: true,
  description: 'RFC 9457 problem details (application/problem+json)',
});

/** A response served as application/problem+json (the type sendProblem sets, so this schema serializes it). */
const problemSchema = (description: string) => ({
  description,
  content: { 'application/problem+json': { schema: Problem } },
});

/**
 * The error responses of an operation: one per status, its description naming the catalogue's
 * codes (each explained at /problems/{code}), then any other 4xx and the 5xx.
 */
function responsesFor(codes: ProblemCode[]): Record<string, ReturnType<typeof problemSchema>> {
  const byStatus = new Map<number, ProblemCode[]>();
  for (const code of new Set(codes)) {
    const status = problemCatalog[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const out: Record<string, ReturnType<typeof problemSchema>> = {};
  for (const [status, cs] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    out[String(status)] = problemSchema(cs.map((c) => `\`${c}\`: ${problemCatalog[c].title}`).join('; '));
  }
  out['4xx'] = problemSchema('Another refusal; its `code` is explained at /problems/{code}');
  out['5xx'] = problemSchema(
    '`internal_error` (opaque; quote the request id) or `service_unavailable` (retry after Retry-After)',
  );
  return out;
}

/** What every operation behind the API key can answer: invalid input, no key, rate and load limits. */
const AUTHENTICATED: ProblemCode[] = ['validation_failed', 'unauthorized', 'rate_limited', 'service_unavailable'];

/** The error responses of an operation behind the API key, with the codes of its own. */
export const problemResponses = (...codes: ProblemCode[]) => responsesFor([...AUTHENTICATED, ...codes]);

/** The error responses of an operation outside the API key (a pre-signed download). */
export const publicProblemResponses = (...codes: ProblemCode[]) =>
  responsesFor(['validation_failed', 'service_unavailable', ...codes]);

export const ProblemResponses = problemResponses();

export async function registerOpenApi(app: Api, publicBaseUrl: string): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Field analysis service',
        version: '1.0.0',
        description:
          'Vegetation indices, reports and signed webhooks for farm fields. Authenticate with `Authorization: Bearer <API key>`. ' +
          'Errors are application/problem+json with a stable `code`.',
      },
      servers: [{ url: publicBaseUrl }],
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'API key (fak_…)' } } },
      security: [{ bearer: [] }],
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs', staticCSP: true });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
