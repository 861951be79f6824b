/**
 * The answer of a pre-signed download (a report's file, a batch job's file): its headers, one byte
 * range (ranges.ts), and HEAD without the body. A ready file never changes, so its id and size make
 * a strong ETag.
 */
import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { requestedSpan, type ByteSpan } from './ranges.js';

export interface DownloadFile {
  id: string;
  filename: string;
  contentType: string;
  size: number;
  /** The file, or bytes `start`–`end` of it (both included). */
  body(span: ByteSpan | null): Buffer | Readable;
}

/** The OpenAPI 200 (the whole file) and 206 (one range) of a download in these media types. */
export function fileResponses(description: string, types: string[]) {
  // Documentation only: Fastify sends a Buffer or a stream without serializing it.
  const content = Object.fromEntries(
    types.map((t) => [t, { schema: Type.Unsafe<Buffer | Readable>({ type: 'string', format: 'binary' }) }]),
  );
  return {
    200: { description, content },
    206: {
      description:
        'One byte range of the file (a Range header of one range, an If-Range matching the ETag if any): Content-Range says which',
      content,
    },
  };
}

/** The headers of a download's answer: 206's Content-Range and length, or 200's length; both ETag and Accept-Ranges. */
function spanHeaders(size: number, etag: string, span: ByteSpan | null): Record<string, string> {
  const common = { ETag: etag, 'Accept-Ranges': 'bytes' };
  if (!span) return { ...common, 'Content-Length': String(size) };
  return {
    ...common,
    'Content-Range': `bytes ${span.start}-${span.end}/${size}`,
    'Content-Length': String(span.end - span.start + 1),
  };
}

export function sendFile(req: FastifyRequest, reply: FastifyReply, file: DownloadFile): FastifyReply {
  const etag = `"${file.id}.${file.size}"`;
  const span = requestedSpan(req.headers, file.size, etag);
  return (
    reply
      .code(span ? 206 : 200)
      .header('Content-Type', file.contentType)
      .header('Content-Disposition', `attachment; filename="${file.filename}"`)
      .headers(spanHeaders(file.size, etag, span))
      .header('Cache-Control', 'private, no-store')
      .header('X-Content-Type-Options', 'nosniff')
      // HEAD (a download manager's first question: size, ranges) gets no body: Fastify's HEAD
      // handler drains a stream payload, which for a batch file read every part from the database.
      .send(req.method === 'HEAD' ? Readable.from([]) : file.body(span))
  );
}
