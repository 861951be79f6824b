/**
 * The image routes of the indices feature (docs/rasters.md): the field raster (COG, PNG, world
 * file), WebMercatorQuad map tiles and their TileJSON. Registered by indexRoutes (routes.ts).
 */
import { Type } from 'typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Api } from '../platform/http/context.js';
import { AppError } from '../platform/errors.js';
import { problemResponses } from '../platform/http/openapi.js';
import { windowLonLatBounds } from '../imagery/index.js';
import {
  cogMetadata,
  crsName,
  drawImage,
  etagOf,
  ImageCache,
  MAX_ZOOM,
  notModified,
  prepareRaster,
  renderRaster,
  tileJson,
  worldFile,
  type Prepared,
} from './rasters.js';
import type { IndexDeps } from './types.js';

const Query = {
  index: Type.String({
    minLength: 1,
    maxLength: 32,
    description: 'NDVI, NDRE, NDWI, EVI, SAVI, MSAVI2, custom (or another catalogue name)',
  }),
  date: Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$', description: 'the capture is chosen as for GET indices' }),
  imagery_id: Type.Optional(Type.String({ maxLength: 64 })),
  formula: Type.Optional(Type.String({ maxLength: 1000 })),
  rescale: Type.Optional(
    Type.String({
      maxLength: 64,
      description:
        "min,max: the range the colour ramp spans (default: the index's, see docs/rasters.md); values outside take the end colours",
    }),
  ),
};

const Binary = (types: string[], description: string) => ({
  description,
  content: Object.fromEntries(
    types.map((t) => [t, { schema: Type.Unsafe<Buffer>({ type: 'string', format: 'binary' }) }]),
  ),
});

const NotModified = { description: 'Not modified: If-None-Match names the current ETag', type: 'null' };

const IMAGE_PROBLEMS = problemResponses(
  'not_found',
  'invalid_formula',
  'no_imagery',
  'imagery_does_not_cover_field',
  'missing_bands',
  'no_usable_imagery',
  'unprocessable',
);

export const COG_TYPE = 'image/tiff; application=geotiff; profile=cloud-optimized';

/** ETag, caching and the chosen capture; true when the client's copy is current (304 sent). */
function conditional(req: FastifyRequest, reply: FastifyReply, p: Prepared, etag: string): boolean {
  reply
    .header('etag', etag)
    .header('cache-control', 'private, no-cache')
    .header('x-imagery-id', p.chosen.head.imagery_id)
    .header('x-imagery-date', p.chosen.head.date);
  if (!notModified(req.headers['if-none-match'], etag)) return false;
  reply.code(304).send();
  return true;
}

const fmt = (n: number) => Number(n.toPrecision(12)).toString();

export function registerRasterRoutes(
  app: Api,
  deps: IndexDeps & { publicBaseUrl: string; imageCacheMb: number },
): void {
  const tags = ['indices'];
  const images = new ImageCache(deps.imageCacheMb * 1_048_576);
  app.get(
    '/fields/:id/indices/raster',
    {
      schema: {
        tags,
        summary: 'Index of a field as a Cloud Optimized GeoTIFF or a coloured PNG',
        description:
          'format=tif: float32 COG over the field window in the capture CRS (nodata NaN: masked, cloud, outside the field, ÷0; DEFLATE, floating-point predictor; ' +
          'index, formula and capture date in the metadata). format=png: RGBA, the index ramp over `rescale`, transparent where there is no value; its WGS84 bounds in ' +
          'X-Bounds-WGS84 (west,south,east,north) and its world file in X-World-File. format=pgw: the world file itself (capture CRS in X-CRS). ' +
          'ETag on every answer; If-None-Match with it answers 304.',
        params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
        querystring: Type.Object(
          {
            ...Query,
            format: Type.Union([Type.Literal('tif'), Type.Literal('png'), Type.Literal('pgw')], { default: 'tif' }),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Binary([COG_TYPE, 'image/png', 'text/plain'], 'The COG, the PNG or the world file'),
          304: NotModified,
          ...IMAGE_PROBLEMS,
        },
      },
    },
    async (req, reply) => {
      const p = await prepareRaster(deps, req.account.id, req.params.id, req.query);
      const format = req.query.format ?? 'tif';
      const etag = etagOf(p, format);
      if (conditional(req, reply, p, etag)) return reply;
      const base = `${req.params.id}_${p.chosen.name}_${p.chosen.head.date}`;
      if (format === 'tif') {
        const r = await images.get(etag, () => drawImage(deps, p, cogMetadata(p)));
        return reply.type(COG_TYPE).header('content-disposition', `attachment; filename="${base}.tif"`).send(r.bytes);
      }
      if (format === 'pgw') {
        const r = await renderRaster(deps, p, { kind: 'grid' });
        return reply
          .type('text/plain; charset=utf-8')
          .header('x-crs', crsName(r.window))
          .header('content-disposition', `attachment; filename="${base}.pgw"`)
          .send(`${worldFile(r.window).map(fmt).join('\n')}\n`);
      }
      const r = await images.get(etag, () => drawImage(deps, p, { kind: 'png', ramp: p.style.ramp, ...rangeOf(p) }));
      return reply
        .type('image/png')
        .header('x-bounds-wgs84', windowLonLatBounds(r.window).map(fmt).join(','))
        .header('x-world-file', worldFile(r.window).map(fmt).join(','))
        .header('x-crs', crsName(r.window))
        .header('x-rescale', r.range!.map(fmt).join(','))
        .header('content-disposition', `inline; filename="${base}.png"`)
        .send(r.bytes);
    },
  );

  app.get(
    '/fields/:id/indices/tiles/:z/:x/:y.png',
    {
      schema: {
        tags,
        summary: 'Map tile of a field index (WebMercatorQuad, 256 px PNG)',
        description:
          `OGC WebMercatorQuad tile z/x/y (0 ≤ z ≤ ${MAX_ZOOM}, 0 ≤ x, y < 2^z), the index coloured as the field PNG, clipped to the field: ` +
          'transparent outside it and where there is no value (a tile that misses the field is a transparent 256 × 256 PNG, not a 204). ' +
          'Nearest neighbour from the capture grid. ETag on every tile; If-None-Match with it answers 304.',
        params: Type.Object({
          id: Type.String({ maxLength: 64 }),
          z: Type.Integer({ minimum: 0, maximum: MAX_ZOOM }),
          x: Type.Integer({ minimum: 0 }),
          y: Type.Integer({ minimum: 0 }),
        }),
        querystring: Type.Object(Query, { additionalProperties: false }),
        response: { 200: Binary(['image/png'], 'The tile'), 304: NotModified, ...IMAGE_PROBLEMS },
      },
    },
    async (req, reply) => {
      const { z, x, y } = req.params;
      const limit = 2 ** z;
      for (const [name, v] of [
        ['x', x],
        ['y', y],
      ] as const)
        if (v >= limit)
          throw new AppError('validation_failed', `tile ${z}/${x}/${y} is outside the tile matrix of zoom ${z}`, {
            errors: [{ path: `/path/${name}`, code: 'tile_out_of_range', message: `must be below 2^${z} = ${limit}` }],
          });
      const p = await prepareRaster(deps, req.account.id, req.params.id, req.query);
      const etag = etagOf(p, `tile/${z}/${x}/${y}`);
      if (conditional(req, reply, p, etag)) return reply;
      const r = await images.get(etag, () =>
        drawImage(deps, p, { kind: 'tile', ramp: p.style.ramp, ...rangeOf(p), z, x, y }),
      );
      return reply.type('image/png').header('x-rescale', r.range!.map(fmt).join(',')).send(r.bytes);
    },
  );

  app.get(
    '/fields/:id/indices/tilejson.json',
    {
      schema: {
        tags,
        summary: 'TileJSON 3.0.0 of the map tiles of a field index',
        description:
          'The tile URL template carries the same query; bounds are the field’s; minzoom and maxzoom are where the field shows (tiles outside them are served too).',
        params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
        querystring: Type.Object(Query, { additionalProperties: false }),
        response: {
          200: Type.Object(
            {
              tilejson: Type.Literal('3.0.0'),
              tiles: Type.Array(Type.String()),
              minzoom: Type.Integer(),
              maxzoom: Type.Integer(),
              bounds: Type.Array(Type.Number(), { minItems: 4, maxItems: 4 }),
              center: Type.Array(Type.Number(), { minItems: 3, maxItems: 3 }),
            },
            { additionalProperties: true },
          ),
          ...IMAGE_PROBLEMS,
        },
      },
    },
    async (req, reply) => {
      const p = await prepareRaster(deps, req.account.id, req.params.id, req.query);
      const r = await renderRaster(deps, p, { kind: 'grid' });
      const raw = req.url.indexOf('?');
      reply.header('cache-control', 'private, no-cache');
      return tileJson(p, r.window, deps.publicBaseUrl, req.params.id, raw < 0 ? '' : req.url.slice(raw + 1));
    },
  );
}

const rangeOf = (p: Prepared) => (p.style.range ? { range: p.style.range } : {});
