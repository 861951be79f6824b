/** OpenAPI 3 generated from the route schemas, served at /openapi.json with interactive docs at /docs. */
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { Type } from 'typebox';
import type { Api } from './context.js';

export const Problem = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    code: Type.String(),
    instance: Type.Optional(Type.String()),
    request_id: Type.Optional(Type.String()),
    errors: Type.Optional(Type.Array(Type.Object({ path: Type.String(), code: Type.Optional(Type.String()), message: Type.String() }))),
  },
  { additionalProperties: true, description: 'RFC 9457 problem details (application/problem+json)' },
);

export const ProblemResponses = {
  '4xx': Problem,
  '5xx': Problem,
};

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
