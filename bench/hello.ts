/**
 * The framework's limit, for `npm run bench -- http`: Fastify's own hello-world (the project's
 * fastify, defaults: no logger, no hooks, no plugins, no schema) answering a fixed JSON body, in a
 * process of its own started like the service (bench/service.ts). The body (BENCH_HELLO_BODY, JSON
 * text) is the service's answer to the request being compared; it is returned as an object, so
 * Fastify serialises it on every request as its hello-world does. The route has the same path as
 * GET /v1/fields/{id}/indices, so that routing and query parsing are the same work.
 */
import Fastify from 'fastify';

const body = JSON.parse(process.env.BENCH_HELLO_BODY ?? '{"hello":"world"}') as object;
const app = Fastify();
app.get('/v1/fields/:id/indices', async () => body);
app.get('/readyz', async () => ({ status: 'ready' }));
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
for (const signal of ['SIGTERM', 'SIGINT'] as const)
  process.once(signal, () => {
    void app.close().then(() => process.exit(0));
  });
