import { Type, type Static } from 'typebox';
import { PageEnvelope, PageQuery } from '../platform/http/pagination.js';

const DATE = '^\\d{4}-\\d{2}-\\d{2}$';

// The boundary is checked by validateBoundary (domain code) for a precise JSON Pointer per issue;
// the schema only says "an object" so those messages are not masked by a generic one.
const Boundary = Type.Object(
  {},
  {
    additionalProperties: true,
    description: 'GeoJSON Polygon or MultiPolygon in WGS84 lon/lat (RFC 7946). A Feature wrapping one is accepted.',
    examples: [
      {
        type: 'Polygon',
        coordinates: [
          [
            [5.0, 51.0],
            [5.01, 51.0],
            [5.01, 51.01],
            [5.0, 51.01],
            [5.0, 51.0],
          ],
        ],
      },
    ],
  },
);

const NullableDate = Type.Union([Type.String({ pattern: DATE, description: 'YYYY-MM-DD' }), Type.Null()]);
const NullableCrop = Type.Union([Type.String({ minLength: 1, maxLength: 100 }), Type.Null()]);

export const FieldCreate = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    boundary: Boundary,
    crop_type: Type.Optional(NullableCrop),
    planting_date: Type.Optional(NullableDate),
    harvest_date: Type.Optional(NullableDate),
  },
  { additionalProperties: false },
);
export type FieldCreate = Static<typeof FieldCreate>;

export const FieldPatch = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    boundary: Type.Optional(Boundary),
    crop_type: Type.Optional(NullableCrop),
    planting_date: Type.Optional(NullableDate),
    harvest_date: Type.Optional(NullableDate),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type FieldPatch = Static<typeof FieldPatch>;

export const Field = Type.Object({
  id: Type.String({ examples: ['fld_3q2Yb0rWf0C1m9Jd2m5uZA'] }),
  name: Type.String(),
  boundary: Type.Object({}, { additionalProperties: true }),
  area_ha: Type.Number({ description: 'Geodesic area on the WGS84 ellipsoid, hectares.' }),
  bbox: Type.Array(Type.Number(), { minItems: 4, maxItems: 4, description: '[min lon, min lat, max lon, max lat]' }),
  crop_type: Type.Union([Type.String(), Type.Null()]),
  planting_date: Type.Union([Type.String(), Type.Null()]),
  harvest_date: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
});
export type Field = Static<typeof Field>;

export const FieldParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
export const FieldListQuery = Type.Object(
  {
    ...PageQuery.properties,
    crop_type: Type.Optional(
      Type.String({ minLength: 1, maxLength: 100, description: 'Only fields with this crop type.' }),
    ),
  },
  { additionalProperties: false },
);
export const FieldList = PageEnvelope(Field);
