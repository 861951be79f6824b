import { Type, type Static } from 'typebox';
import { EVENT_TYPES } from '../events/index.js';
import { PageEnvelope, PageQuery } from '../platform/http/pagination.js';

/** Types a webhook may subscribe to: every event except the registration test, or `*`. */
export const SUBSCRIBABLE = EVENT_TYPES.filter((e) => e !== 'webhook.test');
const EventName = Type.String({
  minLength: 1,
  maxLength: 64,
  description: `One of ${SUBSCRIBABLE.join(', ')}, or * for all current and future types.`,
});

export const WebhookCreate = Type.Object(
  {
    url: Type.String({ minLength: 1, maxLength: 2048, description: 'HTTPS URL that receives deliveries.' }),
    events: Type.Array(EventName, { minItems: 1, maxItems: 32, uniqueItems: true }),
    secret: Type.Optional(
      Type.String({
        minLength: 16,
        maxLength: 256,
        description: 'HMAC-SHA256 signing secret. When omitted the service generates one and returns it once.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type WebhookCreate = Static<typeof WebhookCreate>;

export const WebhookPatch = Type.Object(
  {
    status: Type.Optional(Type.Union([Type.Literal('active'), Type.Literal('disabled')])),
    replay: Type.Optional(
      Type.Boolean({
        description: 'With status active: re-queue the deliveries stopped or failed while the webhook was disabled.',
      }),
    ),
    events: Type.Optional(Type.Array(EventName, { minItems: 1, maxItems: 32, uniqueItems: true })),
    url: Type.Optional(
      Type.String({ minLength: 1, maxLength: 2048, description: 'A new URL is tested again like at registration.' }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type WebhookPatch = Static<typeof WebhookPatch>;

export const Webhook = Type.Object({
  id: Type.String(),
  url: Type.String(),
  events: Type.Array(Type.String()),
  status: Type.Union([Type.Literal('active'), Type.Literal('disabled')]),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
  disabled_reason: Type.Union([Type.String(), Type.Null()]),
  consecutive_failures: Type.Integer({
    description:
      'Failed delivery attempts in a row, across all deliveries; a 2xx resets it, and at 5 the webhook is disabled.',
  }),
  secret: Type.Optional(
    Type.String({ description: 'Only in the creation response, and only when the service generated it.' }),
  ),
});
export type Webhook = Static<typeof Webhook>;

export const WebhookParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
export const DeliveryParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64 }),
  delivery_id: Type.String({ minLength: 1, maxLength: 64 }),
});
export const WebhookList = PageEnvelope(Webhook);
export const WebhookListQuery = Type.Object({ ...PageQuery.properties }, { additionalProperties: false });

export const DeliveryStatus = Type.Union(['pending', 'succeeded', 'failed', 'cancelled'].map((s) => Type.Literal(s)));
export const Attempt = Type.Object({
  attempt: Type.Integer(),
  attempted_at: Type.String({ format: 'date-time' }),
  status_code: Type.Union([Type.Integer(), Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()]),
  latency_ms: Type.Number(),
});
export const Delivery = Type.Object({
  id: Type.String(),
  webhook_id: Type.String(),
  event_id: Type.String(),
  event_type: Type.String(),
  status: DeliveryStatus,
  attempt_count: Type.Integer(),
  next_attempt_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  stopped_reason: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.String({ format: 'date-time' }),
  attempts: Type.Array(Attempt),
});
export type Delivery = Static<typeof Delivery>;
export const DeliveryListQuery = Type.Object(
  { ...PageQuery.properties, status: Type.Optional(DeliveryStatus) },
  { additionalProperties: false },
);
export const DeliveryList = PageEnvelope(Delivery);
