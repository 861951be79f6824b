/**
 * The dashboard: the static page `npm run build` bundles into dist/dashboard (scripts/build-dashboard.mjs,
 * esbuild), served by the service itself at /dashboard. The files are few and small, so they are read
 * and gzipped once at start-up and answered from memory: index.html revalidated on every load
 * (`no-cache` with an ETag), the content-hashed scripts, styles and images cached for a year
 * (`immutable`). The page talks to /v1 with the key a person pastes in; it needs no route of its own.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { Type } from 'typebox';
import { AppError } from '../errors.js';
import { acceptsEncoding } from './accept-encoding.js';
import type { Api } from './context.js';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
  '.json': 'application/json',
  '.map': 'application/json',
};

interface Asset {
  type: string;
  body: Buffer;
  gzip: Buffer | null;
  etag: string;
  cache: string;
}

/** Everything in `dir` (flat), keyed by file name; empty when the dashboard is not built. */
export function loadDashboardAssets(dir: string): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  if (!existsSync(path.join(dir, 'index.html'))) return assets;
  for (const name of readdirSync(dir)) {
    const type = TYPES[path.extname(name)];
    if (!type) continue;
    const body = readFileSync(path.join(dir, name));
    const compressible = !type.startsWith('image/png');
    const gz = compressible ? gzipSync(body, { level: 9 }) : null;
    assets.set(name, {
      type,
      body,
      gzip: gz && gz.length < body.length ? gz : null,
      etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
      cache: name === 'index.html' ? 'no-cache' : 'public, max-age=31536000, immutable',
    });
  }
  return assets;
}

// The page's own origin for everything; the map draws tiles from the API (same origin) and no basemap.
const CSP =
  "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; connect-src 'self'; " +
  "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'";

export function dashboardRoutes(app: Api, dir: string): void {
  const assets = loadDashboardAssets(dir);
  const send = (name: string, req: { headers: Record<string, unknown> }, reply: import('fastify').FastifyReply) => {
    const a = assets.get(name);
    if (!a) {
      if (assets.size === 0)
        throw new AppError('not_found', 'The dashboard is not built: run `npm run build` (or `npm start`).');
      throw new AppError('not_found', `No dashboard file ${name}.`);
    }
    reply.header('content-type', a.type).header('cache-control', a.cache).header('etag', a.etag);
    reply.header('x-content-type-options', 'nosniff');
    if (name === 'index.html') reply.header('content-security-policy', CSP).header('referrer-policy', 'no-referrer');
    if (a.gzip) reply.header('vary', 'Accept-Encoding');
    if (req.headers['if-none-match'] === a.etag) return reply.code(304).send();
    if (a.gzip && acceptsEncoding(req.headers['accept-encoding'] as string | undefined, 'gzip'))
      return reply.header('content-encoding', 'gzip').send(a.gzip);
    return reply.send(a.body);
  };
  const hide = { hide: true };
  app.get('/', { schema: hide }, async (_req, reply) => reply.redirect('/dashboard/', 302));
  app.get('/dashboard', { schema: hide }, async (req, reply) => send('index.html', req, reply));
  app.get(
    '/dashboard/:file',
    { schema: { ...hide, params: Type.Object({ file: Type.String({ pattern: '^[A-Za-z0-9._-]{1,100}$' }) }) } },
    async (req, reply) => send(req.params.file, req, reply),
  );
}
