/** HTTP schemas of the subscription endpoints (types come from here, never written twice). */
import { Type, type Static } from 'typebox';
import { PageEnvelope, PageQuery } from '../platform/http/pagination.js';
import { BAND_NAMES, PRESET_NAMES } from './presets.js';

export const SUBSCRIPTION_STATUSES = ['active', 'paused'] as const;
export type SubscriptionStatus = (typeof SUBSCRIPTION_STATUSES)[number];

const Url = Type.String({
  minLength: 1,
  maxLength: 2048,
  description:
    'Root of the STAC API (its landing page), http:// or https://, without credentials. Must resolve to public addresses unless the operator set SUBSCRIPTIONS_ALLOW_PRIVATE_NETWORKS.',
});
const Collection = Type.String({
  minLength: 1,
  maxLength: 128,
  pattern: '^[A-Za-z0-9][A-Za-z0-9._:-]*$',
  description: 'STAC collection id searched. Default `sentinel-2-l2a`.',
});
/** Loose on purpose: the service checks names and keys and says what is wrong in its own words. */
const Assets = Type.Union(
  [
    Type.String({ minLength: 1, maxLength: 64 }),
    Type.Record(Type.String(), Type.String({ maxLength: 256 }), { maxProperties: 32 }),
  ],
  {
    description: `A preset (${PRESET_NAMES.join(', ')}) or a map band → the Item's asset key, with bands among ${BAND_NAMES.join(', ')} (at least one besides SCL; SCL is the cloud mask). Default \`earth-search\`.`,
  },
);
const MaxCloudCover = Type.Union([Type.Number({ minimum: 0, maximum: 100 }), Type.Null()], {
  description:
    'Items whose scene `eo:cloud_cover` (percent) is above this are not registered; null: no filter. Default null.',
});
const StartDate = Type.String({
  pattern: '^\\d{4}-\\d{2}-\\d{2}$',
  description:
    'YYYY-MM-DD, not in the future: the first search (and the backfill of each new field) goes back to this date. Default: 30 days before today (UTC).',
});
const SclExclude = Type.Union([Type.Array(Type.Integer(), { maxItems: 100 }), Type.Null()], {
  description:
    "Sentinel-2 SCL classes (0-11) counted as unusable in the field cloud cover of the captures this subscription registers (imagery_fields, imagery.available's cloud_cover, and so the best-capture choice), as scl_exclude on GET indices; null: the default [0, 1, 3, 8, 9, 10, 11]; []: none. Captures registered before a change keep their counts.",
});
const CloudDilation = Type.Union([Type.Number(), Type.Null()], {
  description:
    'Also count as unusable the pixels within this many metres (0-1000) of an excluded cloud or shadow pixel (classes 3, 8, 9, 10), as cloud_dilation_m on GET indices; null or 0: none.',
});
const Status = Type.Enum(SUBSCRIPTION_STATUSES, {
  description: 'active: polled every SUBSCRIPTION_POLL_INTERVAL; paused: not polled. Default active.',
});

export const SubscriptionCreate = Type.Object(
  {
    stac_api_url: Url,
    collection: Type.Optional(Collection),
    assets: Type.Optional(Assets),
    max_cloud_cover: Type.Optional(MaxCloudCover),
    start_date: Type.Optional(StartDate),
    status: Type.Optional(Status),
    scl_exclude: Type.Optional(SclExclude),
    cloud_dilation_m: Type.Optional(CloudDilation),
  },
  { additionalProperties: false },
);
export type SubscriptionCreate = Static<typeof SubscriptionCreate>;

export const SubscriptionPatch = Type.Object(
  {
    stac_api_url: Type.Optional(Url),
    collection: Type.Optional(Collection),
    assets: Type.Optional(Assets),
    max_cloud_cover: Type.Optional(MaxCloudCover),
    start_date: Type.Optional(StartDate),
    status: Type.Optional(Status),
    scl_exclude: Type.Optional(SclExclude),
    cloud_dilation_m: Type.Optional(CloudDilation),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description:
      'Any writable member. A change of what is searched (url, collection, assets, max_cloud_cover, start_date) starts the search again from start_date; captures already registered stay and are not registered twice. A change of the cloud mask (scl_exclude, cloud_dilation_m) applies to the captures registered from then on. The default subscription takes status only.',
  },
);
export type SubscriptionPatch = Static<typeof SubscriptionPatch>;

const Timestamp = Type.String({ format: 'date-time' });
const OptionalTimestamp = (description: string) => Type.Union([Timestamp, Type.Null()], { description });

export const Subscription = Type.Object({
  id: Type.String({ description: '`isub_…`' }),
  stac_api_url: Type.String(),
  collection: Type.String(),
  assets: Type.Union([Type.String(), Type.Record(Type.String(), Type.String())]),
  max_cloud_cover: Type.Union([Type.Number(), Type.Null()]),
  start_date: Type.String({ description: 'YYYY-MM-DD' }),
  status: Type.Enum(SUBSCRIPTION_STATUSES),
  scl_exclude: Type.Array(Type.Integer(), {
    description: "The SCL classes the captures' field cloud cover leaves out (the default mask's when none was set).",
  }),
  cloud_dilation_m: Type.Number({ description: 'The dilation around clouds and shadows, metres (0: none).' }),
  default: Type.Boolean({
    description:
      "The operator's subscription (DEFAULT_SUBSCRIPTION_URL): set by configuration; the account may pause or resume it only.",
  }),
  last_polled_at: OptionalTimestamp('When the last poll ended.'),
  last_error: Type.Union([Type.String(), Type.Null()], {
    description: 'Why the last poll failed; null after a successful one.',
  }),
  items_registered: Type.Integer({ description: 'Captures registered from this subscription.' }),
  poll_requested_at: OptionalTimestamp('Set by POST …/poll until the poll it asked for has run.'),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Subscription = Static<typeof Subscription>;

export const SubscriptionParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
export const SubscriptionList = PageEnvelope(Subscription);
export const SubscriptionListQuery = Type.Object({ ...PageQuery.properties }, { additionalProperties: false });
