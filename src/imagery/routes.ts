import { Type } from 'typebox';
import type { Api, Services } from '../platform/http/context.js';
import { ProblemResponses } from '../platform/http/openapi.js';
import { page, PageEnvelope, PageQuery, setLinkHeader } from '../platform/http/pagination.js';
import { FieldImagery, Imagery, ImageryCreate } from './schemas.js';
import { getImagery, listFieldImagery, registerImagery, type ImageryDeps } from './service.js';

export function imageryRoutes(app: Api, s: Services, deps: ImageryDeps): void {
  const tags = ['imagery'];
  app.post('/imagery', {
    schema: {
      tags,
      summary: 'Register a capture',
      description: 'Bands as COG URLs or local paths (inside IMAGERY_ROOTS), or a STAC Item. Every file is opened and checked; for each of the account\'s fields the capture covers, the field\'s own cloud cover is computed and imagery.available is emitted.',
      body: ImageryCreate,
      response: { 201: Imagery, ...ProblemResponses },
    },
  }, async (req, reply) => {
    const img = await registerImagery(deps, req.account.id, req.body);
    return reply.code(201).header('Location', `${s.config.publicBaseUrl}/v1/imagery/${img.id}`).send(img);
  });

  app.get('/imagery/:id', {
    schema: { tags, summary: 'Get a capture', params: Type.Object({ id: Type.String({ maxLength: 64 }) }), response: { 200: Imagery, ...ProblemResponses } },
  }, async (req) => getImagery(s.db, req.account.id, req.params.id));

  app.get('/fields/:id/imagery', {
    schema: {
      tags,
      summary: 'Captures over a field, with the field\'s own cloud cover',
      params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
      querystring: Type.Object(
        { ...PageQuery.properties, start_date: Type.Optional(Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' })), end_date: Type.Optional(Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' })) },
        { additionalProperties: false },
      ),
      response: { 200: PageEnvelope(FieldImagery), ...ProblemResponses },
    },
  }, async (req, reply) => {
    const { data, total } = await listFieldImagery(s.db, req.account.id, req.params.id, req.query);
    const p = page(data, total, req.query);
    setLinkHeader(reply, req, s.config.publicBaseUrl, p);
    return p;
  });
}
