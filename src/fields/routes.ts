import { Type } from 'typebox';
import type { Api, Services } from '../platform/http/context.js';
import { page, setLinkHeader } from '../platform/http/pagination.js';
import { ProblemResponses } from '../platform/http/openapi.js';
import { Field, FieldCreate, FieldList, FieldListQuery, FieldParams, FieldPatch } from './schemas.js';
import { createField, deleteField, getField, listFields, updateField } from './service.js';

export function fieldRoutes(app: Api, s: Services): void {
  const opts = { maxAreaHa: s.config.maxFieldAreaHa };
  const tags = ['fields'];

  app.post('/fields', {
    schema: { tags, summary: 'Register a field', body: FieldCreate, response: { 201: Field, ...ProblemResponses } },
  }, async (req, reply) => {
    const field = await createField(s.db, req.account.id, req.body, opts);
    return reply.code(201).header('Location', `${s.config.publicBaseUrl}/v1/fields/${field.id}`).send(field);
  });

  app.get('/fields', {
    schema: { tags, summary: 'List fields', querystring: FieldListQuery, response: { 200: FieldList, ...ProblemResponses } },
  }, async (req, reply) => {
    const { data, total } = await listFields(s.db, req.account.id, req.query);
    const p = page(data, total, req.query);
    setLinkHeader(reply, req, s.config.publicBaseUrl, p);
    return p;
  });

  app.get('/fields/:id', {
    schema: { tags, summary: 'Get a field', params: FieldParams, response: { 200: Field, ...ProblemResponses } },
  }, async (req) => getField(s.db, req.account.id, req.params.id));

  app.patch('/fields/:id', {
    schema: {
      tags,
      summary: 'Update a field',
      description: 'Any subset of the attributes; null clears crop_type or a date. Emits field.updated with changed_fields when something changed.',
      params: FieldParams,
      body: FieldPatch,
      response: { 200: Field, ...ProblemResponses },
    },
  }, async (req) => updateField(s.db, req.account.id, req.params.id, req.body, opts));

  app.delete('/fields/:id', {
    schema: { tags, summary: 'Delete a field', params: FieldParams, response: { 204: Type.Null(), ...ProblemResponses } },
  }, async (req, reply) => {
    await deleteField(s.db, req.account.id, req.params.id);
    return reply.code(204).send(null);
  });
}
