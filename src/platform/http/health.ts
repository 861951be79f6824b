import { Type } from 'typebox';
import { isProblemCode, problemCatalog } from '../errors.js';
import type { Api, PlatformServices } from './context.js';

const Check = Type.Object({ status: Type.String(), checks: Type.Optional(Type.Record(Type.String(), Type.String())) });

export function healthRoutes(app: Api, s: PlatformServices): void {
  app.get(
    '/healthz',
    { schema: { tags: ['operations'], summary: 'Liveness', security: [], response: { 200: Check } } },
    async () => ({ status: 'ok' }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        tags: ['operations'],
        summary: 'Readiness: database, queue and compute pool answer',
        security: [],
        response: { 200: Check, 503: Check },
      },
    },
    async (_req, reply) => {
      const probes: Record<string, () => Promise<void>> = {
        database: async () => void (await s.db.query('SELECT 1')),
        ...s.readiness,
      };
      const checks: Record<string, string> = {};
      await Promise.all(
        Object.entries(probes).map(async ([name, probe]) => {
          try {
            await withTimeout(probe(), 2000);
            checks[name] = 'ok';
          } catch (err) {
            checks[name] = `failing: ${(err as Error).message}`;
          }
        }),
      );
      const ok = Object.values(checks).every((v) => v === 'ok');
      return reply.code(ok ? 200 : 503).send({ status: ok ? 'ok' : 'unavailable', checks });
    },
  );

  // `type` of every problem resolves here, so a client (or a person) can look a code up.
  app.get(
    '/problems/:code',
    {
      schema: { hide: true, params: Type.Object({ code: Type.String({ maxLength: 64 }) }) },
    },
    async (req, reply) => {
      const code = req.params.code;
      if (!isProblemCode(code)) return reply.callNotFound();
      return { code, status: problemCatalog[code].status, title: problemCatalog[code].title };
    },
  );
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}
