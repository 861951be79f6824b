import { Type } from 'typebox';
import { routePlugin } from '../platform/http/context.js';
import { ProblemResponses, problemResponses } from '../platform/http/openapi.js';
import { page, setLinkHeader } from '../platform/http/pagination.js';
import {
  Subscription,
  SubscriptionCreate,
  SubscriptionList,
  SubscriptionListQuery,
  SubscriptionParams,
  SubscriptionPatch,
} from './schemas.js';
import {
  createSubscription,
  deleteSubscription,
  getSubscription,
  listSubscriptions,
  requestPoll,
  updateSubscription,
  type SubscriptionDeps,
} from './service.js';

const BASE = '/imagery/subscriptions';

export const subscriptionRoutes = routePlugin('subscriptions-routes', async (app) => {
  const deps: SubscriptionDeps = {
    db: app.db,
    allowPrivateNetworks: app.config.subscriptions.allowPrivateNetworks,
    maxPerAccount: app.config.subscriptions.maxPerAccount,
  };
  const tags = ['subscriptions'];
  const location = (id: string) => `${app.config.publicBaseUrl}/v1${BASE}/${id}`;

  app.post(
    BASE,
    {
      schema: {
        tags,
        summary: 'Subscribe to a STAC API',
        description:
          "The service searches the API (STAC Item Search) over the account's fields every SUBSCRIPTION_POLL_INTERVAL and registers each new Item as a capture, announced by imagery.available. The URL is checked like a webhook's (no credentials, public addresses only unless the operator allows private networks). 201 with the subscription and Location; 409 when the account has SUBSCRIPTIONS_MAX_PER_ACCOUNT already.",
        body: SubscriptionCreate,
        response: { 201: Subscription, ...problemResponses('conflict') },
      },
    },
    async (req, reply) => {
      const sub = await createSubscription(deps, req.account.id, req.body);
      return reply.code(201).header('Location', location(sub.id)).send(sub);
    },
  );

  app.get(
    BASE,
    {
      schema: {
        tags,
        summary: 'List subscriptions',
        querystring: SubscriptionListQuery,
        response: { 200: SubscriptionList, ...ProblemResponses },
      },
    },
    async (req, reply) => {
      const { data, total } = await listSubscriptions(app.db, req.account.id, req.query);
      const p = page(data, total, req.query);
      setLinkHeader(reply, req, app.config.publicBaseUrl, p);
      return p;
    },
  );

  app.get(
    `${BASE}/:id`,
    {
      schema: {
        tags,
        summary: 'Get a subscription',
        params: SubscriptionParams,
        response: { 200: Subscription, ...problemResponses('not_found') },
      },
    },
    async (req) => getSubscription(app.db, req.account.id, req.params.id),
  );

  app.patch(
    `${BASE}/:id`,
    {
      schema: {
        tags,
        summary: 'Update a subscription',
        description:
          'Any writable member. A change of what is searched starts the search again from start_date (captures already registered are not registered twice). The default subscription takes `status` only (else 409).',
        params: SubscriptionParams,
        body: SubscriptionPatch,
        response: { 200: Subscription, ...problemResponses('not_found', 'conflict') },
      },
    },
    async (req) => updateSubscription(deps, req.account.id, req.params.id, req.body),
  );

  app.delete(
    `${BASE}/:id`,
    {
      schema: {
        tags,
        summary: 'Delete a subscription; its captures stay',
        description: 'The default subscription cannot be deleted (409): pause it instead.',
        params: SubscriptionParams,
        response: { 204: Type.Null(), ...problemResponses('not_found', 'conflict') },
      },
    },
    async (req, reply) => {
      await deleteSubscription(app.db, req.account.id, req.params.id);
      return reply.code(204).send(null);
    },
  );

  app.post(
    `${BASE}/:id/poll`,
    {
      schema: {
        tags,
        summary: 'Poll a subscription now',
        description:
          "202 with the subscription (`poll_requested_at` set): a worker polls it at the scheduler's next turn, whatever the interval; one backing off after failures polls when its back-off ends. A paused subscription answers 409.",
        params: SubscriptionParams,
        response: { 202: Subscription, ...problemResponses('not_found', 'conflict') },
      },
    },
    async (req, reply) => reply.code(202).send(await requestPoll(app.db, req.account.id, req.params.id)),
  );
});
