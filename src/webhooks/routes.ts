import { Type } from 'typebox';
import { routePlugin } from '../platform/http/context.js';
import { ProblemResponses, problemResponses } from '../platform/http/openapi.js';
import { page, setLinkHeader } from '../platform/http/pagination.js';
import { getDelivery, listDeliveries, retryDelivery } from './deliveries.js';
import {
  Delivery,
  DeliveryList,
  DeliveryListQuery,
  DeliveryParams,
  Webhook,
  WebhookCreate,
  WebhookList,
  WebhookListQuery,
  WebhookParams,
  WebhookPatch,
} from './schemas.js';
import { createWebhook, deleteWebhook, getWebhook, listWebhooks, updateWebhook, type WebhookDeps } from './service.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Decorated by the services plugin (src/services.ts). */
    webhooks: WebhookDeps;
  }
}

export const webhookRoutes = routePlugin('webhooks-routes', async (app) => {
  const deps = app.webhooks;
  const tags = ['webhooks'];

  app.post(
    '/webhooks',
    {
      schema: {
        tags,
        summary: 'Register a webhook',
        description:
          'Delivers webhook.test with a random challenge at once; the endpoint must answer 200 within 5 s. Then 201 with the webhook ' +
          '(and `secret` when the service generated it: shown only here). Otherwise 422 saying what the endpoint did; nothing is stored.',
        body: WebhookCreate,
        response: { 201: Webhook, ...problemResponses('webhook_limit_reached', 'webhook_test_failed') },
      },
    },
    async (req, reply) => {
      const wh = await createWebhook(deps, req.account.id, req.body);
      return reply.code(201).header('Location', `${app.config.publicBaseUrl}/v1/webhooks/${wh.id}`).send(wh);
    },
  );

  app.get(
    '/webhooks',
    {
      schema: {
        tags,
        summary: 'List webhooks',
        querystring: WebhookListQuery,
        response: { 200: WebhookList, ...ProblemResponses },
      },
    },
    async (req, reply) => {
      const { data, total } = await listWebhooks(app.db, req.account.id, req.query);
      const p = page(data, total, req.query);
      setLinkHeader(reply, req, app.config.publicBaseUrl, p);
      return p;
    },
  );

  app.get(
    '/webhooks/:id',
    {
      schema: {
        tags,
        summary: 'Get a webhook',
        params: WebhookParams,
        response: { 200: Webhook, ...problemResponses('not_found') },
      },
    },
    async (req) => getWebhook(app.db, req.account.id, req.params.id),
  );

  app.patch(
    '/webhooks/:id',
    {
      schema: {
        tags,
        summary: 'Update a webhook',
        description:
          '`status: active` re-enables a disabled webhook (with `replay: true`, the deliveries stopped or failed while it was disabled are sent again); `events` and `url` are updatable, and a new url is tested like at registration.',
        params: WebhookParams,
        body: WebhookPatch,
        response: { 200: Webhook, ...problemResponses('not_found', 'webhook_test_failed') },
      },
    },
    async (req) => updateWebhook(deps, req.account.id, req.params.id, req.body),
  );

  app.delete(
    '/webhooks/:id',
    {
      schema: {
        tags,
        summary: 'Delete a webhook; deliveries stop at once',
        params: WebhookParams,
        response: { 204: Type.Null(), ...problemResponses('not_found') },
      },
    },
    async (req, reply) => {
      await deleteWebhook(deps, req.account.id, req.params.id);
      return reply.code(204).send(null);
    },
  );

  app.get(
    '/webhooks/:id/deliveries',
    {
      schema: {
        tags,
        summary: 'Delivery log',
        params: WebhookParams,
        querystring: DeliveryListQuery,
        response: { 200: DeliveryList, ...problemResponses('not_found') },
      },
    },
    async (req, reply) => {
      const { data, total } = await listDeliveries(app.db, req.account.id, req.params.id, req.query);
      const p = page(data, total, req.query);
      setLinkHeader(reply, req, app.config.publicBaseUrl, p);
      return p;
    },
  );

  app.get(
    '/webhooks/:id/deliveries/:delivery_id',
    {
      schema: {
        tags,
        summary: 'One delivery with its attempts',
        params: DeliveryParams,
        response: { 200: Delivery, ...problemResponses('not_found') },
      },
    },
    async (req) => getDelivery(app.db, req.account.id, req.params.id, req.params.delivery_id),
  );

  app.post(
    '/webhooks/:id/deliveries/:delivery_id/retry',
    {
      schema: {
        tags,
        summary: 'Send one delivery again now',
        description:
          "Queues an attempt at once, whatever the delivery's state; a new run of retries follows if it fails. 202 with the delivery.",
        params: DeliveryParams,
        response: { 202: Delivery, ...problemResponses('not_found', 'webhook_disabled') },
      },
    },
    async (req, reply) =>
      reply.code(202).send(await retryDelivery(deps, req.account.id, req.params.id, req.params.delivery_id)),
  );
});
