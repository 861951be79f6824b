/**
 * Reports endpoints. Everything needs the API key except the download, which is authorised by its
 * pre-signed link (HMAC over id and expiry) so that it can be opened from a browser or an email.
 */
import { Type, type TSchema } from 'typebox';
import { routePlugin } from '../platform/http/context.js';
import { ProblemResponses, problemResponses, publicProblemResponses } from '../platform/http/openapi.js';
import { page, setLinkHeader } from '../platform/http/pagination.js';
import { fileResponses, sendFile } from '../platform/http/downloads.js';
import { CONTENT_SCHEMAS } from './content/schema.js';
import {
  DownloadQuery,
  FieldReportParams,
  Report,
  ReportCreate,
  ReportList,
  ReportListQuery,
  ReportParams,
  REPORT_TYPES,
} from './schemas.js';
import { createReport, deleteReport, getReport, listReports, openDownload, type ReportDeps } from './service.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Decorated by the services plugin (src/services.ts). */
    reports: ReportDeps;
  }
}

/** A JSON Schema document, passed through as it is (the serializer copies every member). */
const JsonSchema = Type.Unsafe<TSchema>(
  Type.Object({}, { additionalProperties: true, description: 'A JSON Schema (draft 2020-12)' }),
);

const ReportFile = fileResponses('The report file, as its format says', [
  'application/pdf',
  'application/json',
  'text/csv',
  'application/zip',
]);

export const reportRoutes = routePlugin('reports-routes', async (app) => {
  const deps = app.reports;
  const tags = ['reports'];

  app.post(
    '/fields/:id/reports',
    {
      schema: {
        tags,
        summary: 'Request a report',
        description:
          'Generation is asynchronous: 202 with the report `pending`; poll GET /v1/reports/{id} or subscribe to `report.ready`. ' +
          'An `Idempotency-Key` header makes retries safe: the same key and body within 24 h answer the same report; the same key with another body is a 422.',
        params: FieldReportParams,
        body: ReportCreate,
        headers: Type.Object(
          { 'idempotency-key': Type.Optional(Type.String({ description: '1-255 visible ASCII characters' })) },
          { additionalProperties: true },
        ),
        response: { 202: Report, ...problemResponses('not_found', 'idempotency_key_reused') },
      },
    },
    async (req, reply) => {
      const { report, replayed } = await createReport(
        deps,
        req.account.id,
        req.params.id,
        req.body,
        req.headers['idempotency-key'],
      );
      if (replayed) reply.header('Idempotent-Replayed', 'true');
      return reply.code(202).header('Location', `${app.config.publicBaseUrl}/v1/reports/${report.id}`).send(report);
    },
  );

  app.get(
    '/reports',
    {
      schema: {
        tags,
        summary: 'List reports',
        description:
          'Newest first. An expired download_url is replaced by a freshly signed one valid for another full lifetime (7 days), as by GET /v1/reports/{id}.',
        querystring: ReportListQuery,
        response: { 200: ReportList, ...ProblemResponses },
      },
    },
    async (req, reply) => {
      const { data, total } = await listReports(deps, req.account.id, req.query);
      const p = page(data, total, req.query);
      setLinkHeader(reply, req, app.config.publicBaseUrl, p);
      return p;
    },
  );

  app.get(
    '/reports/schemas/:type',
    {
      schema: {
        tags,
        summary: "JSON Schema of a report type's content (the json format)",
        params: Type.Object({ type: Type.Enum([...REPORT_TYPES]) }),
        response: { 200: JsonSchema, ...problemResponses() },
      },
    },
    async (req) => CONTENT_SCHEMAS[req.params.type],
  );

  app.get(
    '/reports/:id',
    {
      schema: {
        tags,
        summary: 'Get a report',
        description:
          'When the download link has expired, a freshly signed one valid for another full lifetime (7 days) is returned.',
        params: ReportParams,
        response: { 200: Report, ...problemResponses('not_found') },
      },
    },
    async (req) => getReport(deps, req.account.id, req.params.id),
  );

  app.delete(
    '/reports/:id',
    {
      schema: {
        tags,
        summary: 'Delete a report and its file',
        params: ReportParams,
        response: { 204: Type.Null(), ...problemResponses('not_found') },
      },
    },
    async (req, reply) => {
      await deleteReport(deps, req.account.id, req.params.id);
      return reply.code(204).send(null);
    },
  );
});

/** The download, outside the API-key scope: a second plugin, registered beside /v1's auth. */
export const reportDownloadRoutes = routePlugin(
  'reports-download-routes',
  async (app) => {
    const deps = app.reports;
    app.get(
      '/reports/:id/download',
      {
        schema: {
          tags: ['reports'],
          summary: 'Download a report file (pre-signed link, no API key)',
          description:
            'An expired or altered link is 403; GET /v1/reports/{id} gives a fresh one. One byte range (`Range: bytes=…`, `If-Range` with the ETag) answers 206: a broken download resumes where it stopped.',
          params: ReportParams,
          querystring: DownloadQuery,
          security: [],
          response: {
            ...ReportFile,
            ...publicProblemResponses('not_found', 'invalid_signature', 'link_expired', 'range_not_satisfiable'),
          },
        },
      },
      async (req, reply) => {
        const file = await openDownload(deps, req.params.id, req.query.expires, req.query.signature);
        const { content } = file;
        return sendFile(req, reply, {
          id: req.params.id,
          filename: file.filename,
          contentType: file.contentType,
          size: content.length,
          body: (span) => (span ? content.subarray(span.start, span.end + 1) : content),
        });
      },
    );
  },
  { public: true },
);
