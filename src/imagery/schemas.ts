import { Type, type Static } from 'typebox';

const DATE = '^\\d{4}-\\d{2}-\\d{2}$';
const Href = Type.String({
  minLength: 1,
  maxLength: 2048,
  description:
    "http(s):// URL of a (Cloud Optimized) GeoTIFF read with range requests, a local path inside IMAGERY_ROOTS, or upload://<file id> of one of the account's uploaded files",
});
/**
 * Radiometry a capture may state (reflectance = DN × scale + offset), computed in float32: a scale
 * above 0 (0 makes every pixel 0/0; a negative one turns reflectance over) and both far from where
 * float32 overflows or flushes to zero. Sentinel-2 is 0.0001 and −0.1, Landsat Collection 2
 * 2.75e-5 and −0.2, an 8-bit drone image 1/255, a reflectance file 1.
 */
export const RADIOMETRY = { minScale: 1e-12, maxScale: 1e6, maxOffset: 1e6 } as const;
const Scale = (description?: string) =>
  Type.Number({
    minimum: RADIOMETRY.minScale,
    maximum: RADIOMETRY.maxScale,
    ...(description ? { description } : {}),
  });
const Offset = (description?: string) =>
  Type.Number({
    minimum: -RADIOMETRY.maxOffset,
    maximum: RADIOMETRY.maxOffset,
    ...(description ? { description } : {}),
  });

const BandRef = Type.Union([
  Href,
  Type.Object(
    {
      href: Href,
      index: Type.Optional(
        Type.Integer({ minimum: 1, maximum: 1000, description: '1-based band of a multi-band file' }),
      ),
      scale: Type.Optional(Scale()),
      offset: Type.Optional(Offset()),
    },
    { additionalProperties: false },
  ),
]);

export const ImageryCreate = Type.Object(
  {
    stac_item: Type.Optional(
      Type.Object(
        {},
        {
          additionalProperties: true,
          description:
            'A STAC Item (Sentinel-2 L2A as public catalogues publish it): assets named by band (B04) or common name (red, nir, …), SCL as mask; date, cloud cover and processing-baseline offset come from it',
        },
      ),
    ),
    source: Type.Optional(Type.String({ minLength: 1, maxLength: 64, examples: ['sentinel-2-l2a', 'drone'] })),
    capture_date: Type.Optional(Type.String({ pattern: DATE })),
    cloud_cover: Type.Optional(Type.Union([Type.Number({ minimum: 0, maximum: 100 }), Type.Null()])),
    bands: Type.Optional(Type.Record(Type.String(), BandRef, { description: 'Band name (B01…B12, B8A) → file' })),
    mask: Type.Optional(
      Type.Object(
        { href: Href, index: Type.Optional(Type.Integer({ minimum: 1 })), kind: Type.Literal('scl') },
        { additionalProperties: false },
      ),
    ),
    scale: Type.Optional(
      Scale('reflectance = DN × scale + offset; default 0.0001; from 1e-12 to 1e6 (a band may set its own)'),
    ),
    offset: Type.Optional(
      Offset('default 0 (Sentinel-2 from processing baseline 04.00: −0.1); from −1e6 to 1e6 (a band may set its own)'),
    ),
  },
  { additionalProperties: false },
);
export type ImageryCreate = Static<typeof ImageryCreate>;

export const Imagery = Type.Object({
  id: Type.String(),
  source: Type.String(),
  capture_date: Type.String(),
  cloud_cover: Type.Union([Type.Number(), Type.Null()]),
  bands: Type.Array(Type.String()),
  crs: Type.String({
    examples: ['EPSG:32631'],
    description: 'EPSG:<code>, or for a CRS the GeoKeys define themselves (no EPSG code) its proj4 definition',
  }),
  resolution: Type.Number({
    description:
      'finest band, in the CRS unit (metres; US survey feet for a CRS in feet; degrees for a geographic CRS)',
  }),
  footprint: Type.Object({}, { additionalProperties: true, description: 'GeoJSON Polygon in WGS84' }),
  scale: Type.Number(),
  offset: Type.Number(),
  fields: Type.Array(
    Type.Object({
      field_id: Type.String(),
      cloud_cover: Type.Number({
        description:
          "percent of the field's pixels unusable (a field with no pixel centre inside: of the weights of the pixels it touches)",
      }),
      field_pixels: Type.Integer({
        description: 'pixel centres inside the field (0: it only touches pixels, smaller or thinner than one)',
      }),
      valid_pixels: Type.Integer(),
    }),
  ),
  created_at: Type.String({ format: 'date-time' }),
});
export type Imagery = Static<typeof Imagery>;

export const FieldImagery = Type.Object({
  id: Type.String(),
  source: Type.String(),
  capture_date: Type.String(),
  cloud_cover: Type.Number({
    description:
      "the field's own cloud cover, percent of its pixels (a field with no pixel centre inside: of the weights of the pixels it touches)",
  }),
  scene_cloud_cover: Type.Union([Type.Number(), Type.Null()]),
  field_pixels: Type.Integer({
    description: 'pixel centres inside the field (0: it only touches pixels, smaller or thinner than one)',
  }),
  valid_pixels: Type.Integer(),
});
