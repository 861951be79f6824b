import multipart from '@fastify/multipart';
import { Ajv } from 'ajv';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { AppError } from '../platform/errors.js';
import { DatabaseFileStore, FileTooLargeError, type FileStore } from '../platform/file-store.js';
import { routePlugin } from '../platform/http/context.js';
import { assertStorableText } from '../platform/http/text-guard.js';
import { describeIssues, validationIssues } from '../platform/http/problems.js';
import { problemResponses } from '../platform/http/openapi.js';
import { page, PageEnvelope, PageQuery, setLinkHeader } from '../platform/http/pagination.js';
import { FieldImagery, Imagery, ImageryCreate } from './schemas.js';
import { getImagery, listFieldImagery, registerImagery, type ImageryDeps } from './service.js';
import { registerUpload, type UploadedFile } from './upload.js';

const MAX_FILES = 20;
const MAX_METADATA_BYTES = 1_048_576;
const PART_NAME = /^[A-Za-z0-9._-]{1,64}$/;
const checkMetadata = new Ajv({ allErrors: true, coerceTypes: false, useDefaults: true, strict: false }).compile(
  ImageryCreate,
);

function tooLarge(err: { code?: string }, maxBytes: number): AppError | null {
  if (err instanceof FileTooLargeError) err = { code: 'FST_REQ_FILE_TOO_LARGE' };
  switch (err.code) {
    case 'FST_REQ_FILE_TOO_LARGE':
      return new AppError('payload_too_large', `a file is larger than ${maxBytes} bytes (UPLOAD_MAX_BYTES)`);
    case 'FST_FILES_LIMIT':
      return new AppError('payload_too_large', `more than ${MAX_FILES} files in one upload`);
    case 'FST_PARTS_LIMIT':
    case 'FST_FIELDS_LIMIT':
      return new AppError('payload_too_large', 'too many parts: send one "metadata" field and the files');
    default:
      return null;
  }
}

/**
 * Streams the file parts into the file store of the account (never whole in memory) and returns
 * them with the metadata part, checked against the same schema as POST /v1/imagery. On any failure
 * the files stored so far are deleted.
 */
async function receiveUpload(
  req: FastifyRequest,
  store: FileStore,
  maxBytes: number,
): Promise<{ meta: ImageryCreate; files: UploadedFile[] }> {
  let metaText: string | undefined;
  const files: UploadedFile[] = [];
  try {
    const parts = req.parts({
      limits: { fileSize: maxBytes, files: MAX_FILES, fields: 4, parts: MAX_FILES + 4, fieldSize: MAX_METADATA_BYTES },
    });
    for await (const part of parts) {
      if (part.type === 'file') {
        if (!PART_NAME.test(part.fieldname) || files.some((f) => f.part === part.fieldname)) {
          part.file.resume();
          throw new AppError(
            'validation_failed',
            `file part name "${part.fieldname}" must be unique and 1–64 letters, digits, ".", "_" or "-"`,
            {
              errors: [
                {
                  path: `/parts/${part.fieldname}`,
                  code: 'invalid_part_name',
                  message: 'must be unique and 1–64 letters, digits, ".", "_" or "-"',
                },
              ],
            },
          );
        }
        const stored = await store.put(req.account.id, part.file, { maxBytes });
        files.push({ part: part.fieldname, filename: part.filename, fileId: stored.id, bytes: stored.size });
        // The parser stops a part at the limit (and says so on the next part): refuse it now.
        if (part.file.truncated) throw new FileTooLargeError(maxBytes);
      } else if (part.fieldname === 'metadata') {
        if (metaText !== undefined)
          throw new AppError('validation_failed', 'send one "metadata" part: this upload has two', {
            errors: [{ path: '/parts/metadata', code: 'duplicate_part', message: 'is given twice' }],
          });
        if (part.valueTruncated)
          throw new AppError('payload_too_large', `the metadata part is larger than ${MAX_METADATA_BYTES} bytes`);
        metaText = String(part.value);
      } else {
        throw new AppError(
          'validation_failed',
          `unknown field "${part.fieldname}": send one "metadata" field (JSON) and the files`,
          { errors: [{ path: `/parts/${part.fieldname}`, code: 'unknown_part', message: 'is not a known field' }] },
        );
      }
    }
    if (metaText === undefined)
      throw new AppError(
        'validation_failed',
        'the "metadata" part (JSON, as the body of POST /v1/imagery) is missing',
        { errors: [{ path: '/parts/metadata', code: 'required', message: 'is required' }] },
      );
    let meta: unknown;
    try {
      meta = JSON.parse(metaText);
    } catch (err) {
      throw new AppError('malformed_json', `the metadata part is not valid JSON: ${(err as Error).message}`);
    }
    assertStorableText(meta, '/body');
    if (!checkMetadata(meta)) {
      const issues = validationIssues('body', checkMetadata.errors ?? []);
      throw new AppError('validation_failed', describeIssues(issues), { errors: issues });
    }
    return { meta: meta as ImageryCreate, files };
  } catch (err) {
    await store.delete(files.map((f) => f.fileId));
    if (err instanceof AppError) throw err;
    const e = err as { code?: string; message?: string };
    throw (
      tooLarge(e, maxBytes) ??
      new AppError('validation_failed', `the multipart body cannot be read: ${e.message ?? String(err)}`)
    );
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Decorated by the services plugin (src/services.ts); the fields routes use it too. */
    imagery: ImageryDeps;
  }
}

export const imageryRoutes = routePlugin('imagery-routes', async (app) => {
  const tags = ['imagery'];
  const deps = app.imagery;
  app.post(
    '/imagery',
    {
      schema: {
        tags,
        summary: 'Register a capture',
        description:
          "Bands as COG URLs or local paths (inside IMAGERY_ROOTS), or a STAC Item. Every file is opened and checked; for each of the account's fields the capture covers, the field's own cloud cover is computed and imagery.available is emitted.",
        body: ImageryCreate,
        response: { 201: Imagery, ...problemResponses('invalid_imagery') },
      },
    },
    async (req, reply) => {
      const img = await registerImagery({ ...deps, log: req.log }, req.account.id, req.body);
      return reply.code(201).header('Location', `${app.config.publicBaseUrl}/v1/imagery/${img.id}`).send(img);
    },
  );

  app.register(async (scope) => {
    await scope.register(multipart, { throwFileSizeLimit: true });
    scope.post(
      '/imagery/upload',
      {
        schema: {
          tags,
          summary: 'Register a capture from uploaded GeoTIFF files',
          description:
            'multipart/form-data: a "metadata" field holding the JSON body of POST /v1/imagery, and one file part per GeoTIFF. ' +
            "An href in the metadata (band, mask or STAC asset) that equals a file part's name refers to that file; every href must name a part and every part must be used. " +
            `Files are stored in the database in chunks, so that every process of the deployment reads them; the capture names each as upload://<file id>, which later registrations of the same account may name too. Each may be up to UPLOAD_MAX_BYTES (413 above it), at most ${MAX_FILES} per upload. A refused upload stores nothing.`,
          consumes: ['multipart/form-data'],
          response: { 201: Imagery, ...problemResponses('invalid_imagery', 'payload_too_large') },
        },
      },
      async (req, reply) => {
        if (!req.isMultipart())
          throw new AppError(
            'unsupported_media_type',
            'send multipart/form-data: a "metadata" field and the GeoTIFF files',
          );
        // In the database (or the configured store): every process of the deployment reads it.
        const store = deps.uploads ?? new DatabaseFileStore(app.db);
        const { meta, files } = await receiveUpload(req, store, app.config.uploadMaxBytes);
        const img = await registerUpload({ ...deps, log: req.log }, req.account.id, meta, files, store);
        return reply.code(201).header('Location', `${app.config.publicBaseUrl}/v1/imagery/${img.id}`).send(img);
      },
    );
  });

  app.get(
    '/imagery/:id',
    {
      schema: {
        tags,
        summary: 'Get a capture',
        params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
        response: { 200: Imagery, ...problemResponses('not_found') },
      },
    },
    async (req) => getImagery(app.db, req.account.id, req.params.id),
  );

  app.get(
    '/fields/:id/imagery',
    {
      schema: {
        tags,
        summary: "Captures over a field, with the field's own cloud cover",
        params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
        querystring: Type.Object(
          {
            ...PageQuery.properties,
            start_date: Type.Optional(Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' })),
            end_date: Type.Optional(Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' })),
          },
          { additionalProperties: false },
        ),
        response: { 200: PageEnvelope(FieldImagery), ...problemResponses('not_found') },
      },
    },
    async (req, reply) => {
      const { data, total } = await listFieldImagery(app.db, req.account.id, req.params.id, req.query);
      const p = page(data, total, req.query);
      setLinkHeader(reply, req, app.config.publicBaseUrl, p);
      return p;
    },
  );
});
