/** The list envelope and RFC 8288 Link header every list endpoint uses. */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type, type Static } from 'typebox';

export const PageQuery = Type.Object({
  page: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1, description: 'Page number, from 1.' }),
  per_page: Type.Integer({
    minimum: 1,
    maximum: 100,
    default: 20,
    description: 'Items per page; at most 100 (more is a 400, not a silent clamp).',
  }),
});
export type PageQuery = Static<typeof PageQuery>;

export function PageEnvelope<T extends Parameters<typeof Type.Array>[0]>(item: T) {
  return Type.Object({
    data: Type.Array(item),
    page: Type.Integer(),
    per_page: Type.Integer(),
    total: Type.Integer(),
    total_pages: Type.Integer(),
  });
}

export interface Page<T> {
  data: T[];
  page: number;
  per_page: number;
  total: number;
  total_pages: number;
}

export function page<T>(data: T[], total: number, q: { page: number; per_page: number }): Page<T> {
  return { data, page: q.page, per_page: q.per_page, total, total_pages: Math.max(1, Math.ceil(total / q.per_page)) };
}

/** Sets `Link` with first/prev/next/last relative to the public base URL, keeping other query parameters. */
export function setLinkHeader(reply: FastifyReply, request: FastifyRequest, baseUrl: string, p: Page<unknown>): void {
  const url = new URL(request.url, baseUrl);
  url.searchParams.delete('page');
  url.searchParams.delete('per_page');
  const link = (n: number, rel: string) => {
    const u = new URL(url);
    u.searchParams.set('page', String(n));
    u.searchParams.set('per_page', String(p.per_page));
    return `<${u.toString()}>; rel="${rel}"`;
  };
  const parts = [link(1, 'first')];
  if (p.page > 1) parts.push(link(Math.min(p.page - 1, p.total_pages), 'prev'));
  if (p.page < p.total_pages) parts.push(link(p.page + 1, 'next'));
  parts.push(link(p.total_pages, 'last'));
  reply.header('Link', parts.join(', '));
}
