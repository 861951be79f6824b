/**
 * Batch statistics endpoints. Everything needs the API key except the download, which is
 * authorised by its pre-signed link, as a report's.
 */
import { Type } from 'typebox';
import { routePlugin } from '../platform/http/context.js';
import { ProblemResponses, problemResponses, publicProblemResponses } from '../platform/http/openapi.js';
import { page, setLinkHeader } from '../platform/http/pagination.js';
import { fileResponses, sendFile } from '../platform/http/downloads.js';
import { BatchCreate, BatchJob, BatchList, BatchListQuery, BatchParams, DownloadQuery } from './schemas.js';
import { cancelBatch, createBatch, getBatch, listBatches, openBatchDownload, type BatchDeps } from './service.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Decorated by the services plugin (src/services.ts). */
    batch: BatchDeps & { maxBodyBytes: number };
  }
}

const ResultFile = fileResponses('The result file: CSV with a header row, or NDJSON (one JSON object a line)', [
  'text/csv',
  'application/x-ndjson',
]);

export const batchRoutes = routePlugin('batch-routes', async (app) => {
  const deps = app.batch;
  const tags = ['batch'];

  app.post(
    '/batch/statistics',
    {
      bodyLimit: deps.maxBodyBytes,
      schema: {
        tags,
        summary: 'Request the statistics of many fields or polygons over a season',
        description:
          'Asynchronous: 202 with the job `pending`; poll GET /v1/batch/statistics/{id} or subscribe to `batch.completed`. ' +
          'One row per feature × index × interval, each equal to what GET /v1/fields/{id}/indices/timeseries answers. ' +
          'An `Idempotency-Key` header makes retries safe: the same key and body within 24 h answer the same job; the same key with another body is a 422.',
        body: BatchCreate,
        headers: Type.Object(
          { 'idempotency-key': Type.Optional(Type.String({ description: '1-255 visible ASCII characters' })) },
          { additionalProperties: true },
        ),
        response: { 202: BatchJob, ...problemResponses('idempotency_key_reused', 'invalid_formula') },
      },
    },
    async (req, reply) => {
      const { job, replayed } = await createBatch(deps, req.account.id, req.body, req.headers['idempotency-key']);
      if (replayed) reply.header('Idempotent-Replayed', 'true');
      return reply.code(202).header('Location', `${app.config.publicBaseUrl}/v1/batch/statistics/${job.id}`).send(job);
    },
  );

  app.get(
    '/batch/statistics',
    {
      schema: {
        tags,
        summary: 'List batch statistics jobs',
        description: 'Newest first; an expired download_url is replaced by a freshly signed one.',
        querystring: BatchListQuery,
        response: { 200: BatchList, ...ProblemResponses },
      },
    },
    async (req, reply) => {
      const { data, total } = await listBatches(deps, req.account.id, req.query);
      const p = page(data, total, req.query);
      setLinkHeader(reply, req, app.config.publicBaseUrl, p);
      return p;
    },
  );

  app.get(
    '/batch/statistics/:id',
    {
      schema: {
        tags,
        summary: 'Get a batch statistics job: status, progress, failed features, download link',
        params: BatchParams,
        response: { 200: BatchJob, ...problemResponses('not_found') },
      },
    },
    async (req) => getBatch(deps, req.account.id, req.params.id),
  );

  app.delete(
    '/batch/statistics/:id',
    {
      schema: {
        tags,
        summary: 'Cancel a job (pending or running: 200 with it cancelled), or delete a finished one (204)',
        params: BatchParams,
        response: { 200: BatchJob, 204: Type.Null(), ...problemResponses('not_found') },
      },
    },
    async (req, reply) => {
      const job = await cancelBatch(deps, req.account.id, req.params.id);
      return job ? job : reply.code(204).send(null);
    },
  );
});

/** The download, outside the API-key scope (its link is its authorisation). */
export const batchDownloadRoutes = routePlugin(
  'batch-download-routes',
  async (app) => {
    const deps = app.batch;
    app.get(
      '/batch/statistics/:id/download',
      {
        schema: {
          tags: ['batch'],
          summary: 'Download a batch result file (pre-signed link, no API key)',
          description:
            'An expired or altered link is 403; GET /v1/batch/statistics/{id} gives a fresh one. One byte range (`Range: bytes=…`, `If-Range` with the ETag) answers 206: a broken download resumes where it stopped.',
          params: BatchParams,
          querystring: DownloadQuery,
          security: [],
          response: {
            ...ResultFile,
            ...publicProblemResponses('not_found', 'invalid_signature', 'link_expired', 'range_not_satisfiable'),
          },
        },
      },
      async (req, reply) => {
        return sendFile(
          req,
          reply,
          await openBatchDownload(deps, req.params.id, req.query.expires, req.query.signature),
        );
      },
    );
  },
  { public: true },
);
