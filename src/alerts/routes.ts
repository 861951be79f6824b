import { Type } from 'typebox';
import { routePlugin } from '../platform/http/context.js';
import { ProblemResponses, problemResponses } from '../platform/http/openapi.js';
import { page, PageEnvelope, PageQuery, setLinkHeader } from '../platform/http/pagination.js';
import { alertHistory, createAlertRule, deleteAlertRule, listAlertRules } from './service.js';

const Rule = Type.Object({
  id: Type.String(),
  field_id: Type.String(),
  alert_type: Type.Union([Type.Literal('crop_health'), Type.Literal('water_stress')]),
  index: Type.String(),
  operator: Type.Union([Type.Literal('below'), Type.Literal('above')]),
  threshold: Type.Number(),
  state: Type.Union([Type.Literal('ok'), Type.Literal('breached')]),
  last_value: Type.Union([Type.Number(), Type.Null()]),
  last_evaluated_at: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.String(),
});

const Triggered = Type.Object({
  id: Type.String(),
  alert_id: Type.String(),
  field_id: Type.String(),
  alert_type: Type.String(),
  index: Type.String(),
  value: Type.Number(),
  threshold: Type.Number(),
  imagery_id: Type.Union([Type.String(), Type.Null()]),
  triggered_at: Type.String(),
});

export const alertRoutes = routePlugin('alerts-routes', async (app) => {
  const tags = ['alerts'];
  const FieldParams = Type.Object({ id: Type.String({ maxLength: 64 }) });
  app.post(
    '/fields/:id/alerts',
    {
      schema: {
        tags,
        summary: 'Create an alert rule',
        description:
          "Evaluated on the field's mean of `index` for each new capture (with at least 70 % of the field usable); alert.triggered is emitted when the value crosses the threshold. A field may have at most 50 rules (409 alert_limit_reached).",
        params: FieldParams,
        body: Type.Object(
          {
            alert_type: Type.Union([Type.Literal('crop_health'), Type.Literal('water_stress')]),
            index: Type.String({ minLength: 1, maxLength: 32 }),
            operator: Type.Union([Type.Literal('below'), Type.Literal('above')]),
            threshold: Type.Number({ minimum: -1000, maximum: 1000 }),
          },
          { additionalProperties: false },
        ),
        response: { 201: Rule, ...problemResponses('not_found', 'alert_limit_reached') },
      },
    },
    async (req, reply) => reply.code(201).send(await createAlertRule(app.db, req.account.id, req.params.id, req.body)),
  );

  app.get(
    '/fields/:id/alerts',
    {
      schema: {
        tags,
        summary: 'Alert rules of a field',
        params: FieldParams,
        response: { 200: Type.Object({ data: Type.Array(Rule) }), ...ProblemResponses },
      },
    },
    async (req) => ({ data: await listAlertRules(app.db, req.account.id, req.params.id) }),
  );

  app.delete(
    '/fields/:id/alerts/:alert_id',
    {
      schema: {
        tags,
        summary: 'Delete an alert rule',
        params: Type.Object({ id: Type.String({ maxLength: 64 }), alert_id: Type.String({ maxLength: 64 }) }),
        response: { 204: Type.Null(), ...ProblemResponses },
      },
    },
    async (req, reply) => {
      await deleteAlertRule(app.db, req.account.id, req.params.id, req.params.alert_id);
      return reply.code(204).send(null);
    },
  );

  app.get(
    '/alerts',
    {
      schema: {
        tags,
        summary: 'Alert history of the account',
        querystring: Type.Object(
          { ...PageQuery.properties, field_id: Type.Optional(Type.String({ maxLength: 64 })) },
          { additionalProperties: false },
        ),
        response: { 200: PageEnvelope(Triggered), ...ProblemResponses },
      },
    },
    async (req, reply) => {
      const { data, total } = await alertHistory(app.db, req.account.id, req.query);
      const p = page(data, total, req.query);
      setLinkHeader(reply, req, app.config.publicBaseUrl, p);
      return p;
    },
  );
});
