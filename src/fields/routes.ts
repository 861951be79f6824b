import { Type } from 'typebox';
import { routePlugin } from '../platform/http/context.js';
import { page, setLinkHeader } from '../platform/http/pagination.js';
import { ProblemResponses, problemResponses } from '../platform/http/openapi.js';
import {
  Field,
  FieldCreate,
  FieldList,
  FieldListQuery,
  FieldParams,
  FieldPatch,
  type Field as FieldRecord,
} from './schemas.js';
import { linkFieldImagery } from '../imagery/index.js';
import type { Boundary } from './boundary.js';
import { createField, deleteField, getField, listFields, updateFieldChanges } from './service.js';

/** Fields CRUD; a new or moved field is linked to the captures that cover it (app.imagery). */
export const fieldRoutes = routePlugin('fields-routes', async (app) => {
  const opts = { maxAreaHa: app.config.maxFieldAreaHa };
  const tags = ['fields'];
  // The account's captures that cover a new field, or a field whose boundary changed, are linked
  // to it before the response: its imagery list and index calls see them at once.
  const link = (log: { warn(obj: object, msg: string): void }, accountId: string, f: FieldRecord) =>
    linkFieldImagery({ ...app.imagery, log }, accountId, {
      id: f.id,
      boundary: f.boundary as unknown as Boundary,
      bbox: f.bbox as [number, number, number, number],
    });

  app.post(
    '/fields',
    {
      schema: {
        tags,
        summary: 'Register a field',
        body: FieldCreate,
        response: { 201: Field, ...problemResponses('invalid_boundary') },
      },
    },
    async (req, reply) => {
      const field = await createField(app.db, req.account.id, req.body, opts);
      await link(req.log, req.account.id, field);
      return reply.code(201).header('Location', `${app.config.publicBaseUrl}/v1/fields/${field.id}`).send(field);
    },
  );

  app.get(
    '/fields',
    {
      schema: {
        tags,
        summary: 'List fields',
        querystring: FieldListQuery,
        response: { 200: FieldList, ...ProblemResponses },
      },
    },
    async (req, reply) => {
      const { data, total } = await listFields(app.db, req.account.id, req.query);
      const p = page(data, total, req.query);
      setLinkHeader(reply, req, app.config.publicBaseUrl, p);
      return p;
    },
  );

  app.get(
    '/fields/:id',
    {
      schema: {
        tags,
        summary: 'Get a field',
        params: FieldParams,
        response: { 200: Field, ...problemResponses('not_found') },
      },
    },
    async (req) => getField(app.db, req.account.id, req.params.id),
  );

  app.patch(
    '/fields/:id',
    {
      schema: {
        tags,
        summary: 'Update a field',
        description:
          'Any subset of the attributes; null clears crop_type or a date. Emits field.updated with changed_fields when something changed.',
        params: FieldParams,
        body: FieldPatch,
        response: { 200: Field, ...problemResponses('not_found', 'invalid_boundary') },
      },
    },
    async (req) => {
      const { field, changed } = await updateFieldChanges(app.db, req.account.id, req.params.id, req.body, opts);
      if (changed.includes('boundary')) await link(req.log, req.account.id, field);
      return field;
    },
  );

  app.delete(
    '/fields/:id',
    {
      schema: {
        tags,
        summary: 'Delete a field',
        params: FieldParams,
        response: { 204: Type.Null(), ...problemResponses('not_found') },
      },
    },
    async (req, reply) => {
      await deleteField(app.db, req.account.id, req.params.id);
      return reply.code(204).send(null);
    },
  );
});
