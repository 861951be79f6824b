/**
 * The answers the HTTP layer gives before (or without) a route: as problem+json, like every other
 * error, and in a way a client can read.
 *
 * - Node's parser refuses a request line or headers over `maxHeaderSize` (16 KiB), a malformed
 *   request (a NUL or a bare CR in a header, a bad chunk size) or a request that took too long, and
 *   Fastify would answer with its own JSON. `clientErrorHandler` answers 414 `uri_too_long` (the
 *   request line alone is over the limit), 431 `headers_too_large`, 408 `request_timeout` or 400
 *   `malformed_request`.
 * - The router refuses a path segment over 100 characters (414) and a bad percent-encoding (400):
 *   `frameworkErrors` answers those.
 * - An answer sent before the request body has been read (413 over the body limit, 401, 404, a
 *   refused upload) used to close the connection at once: the client, still sending, got a reset
 *   (EPIPE) instead of the answer. Now the rest of the body is read and discarded after the answer,
 *   up to LINGER_BYTES or LINGER_MS, and only then is a connection still sending closed.
 */
import type { ConnectionError, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { randomUUID } from 'node:crypto';
import http, { type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { AppError, toProblem } from '../errors.js';
import { sendProblem } from './problems.js';

/** How much of an unread request body is drained after the answer, at most. */
export const LINGER_BYTES = 64 * 1024 * 1024;
/** How long a connection is kept open to drain it, at most. */
export const LINGER_MS = 5_000;

/**
 * Keeps reading (and discarding) from a connection whose answer has been sent until the client
 * stops sending, LINGER_BYTES more have arrived or LINGER_MS have passed; then `onDone(false)`, or
 * `onDone(true)` when the client finished in time.
 */
function linger(
  socket: Socket,
  source: NodeJS.EventEmitter,
  finished: () => boolean,
  onDone: (inTime: boolean) => void,
): void {
  if (finished()) {
    onDone(true);
    return;
  }
  const start = socket.bytesRead;
  const done = (inTime: boolean) => {
    clearTimeout(timer);
    source.off('data', onData);
    source.off('end', onEnd);
    socket.off('close', onEnd);
    onDone(inTime);
  };
  const onData = () => {
    if (socket.bytesRead - start > LINGER_BYTES) done(false);
  };
  const onEnd = () => done(true);
  const timer = setTimeout(() => done(false), LINGER_MS);
  timer.unref();
  source.on('data', onData);
  source.once('end', onEnd);
  socket.once('close', onEnd);
}

/**
 * Fastify answers a body over the limit with `Connection: close`, and Node destroys the socket as
 * soon as the answer is written. Instead: keep the connection, let the answer go out, drain the
 * body (bounded) and close only if the client is still sending at the bound.
 */
export function registerLingeringAnswers(app: FastifyInstance): void {
  // A callback hook: no promise per request.
  app.addHook('onSend', (request, reply, payload, done) => {
    const req = request.raw;
    // `complete` is false while a real request's body is still arriving (inject() has no such flag).
    if (req.complete !== false) return done(null, payload);
    if (String(reply.getHeader('connection') ?? '').toLowerCase() === 'close') reply.removeHeader('connection');
    reply.raw.once('finish', () => drainBody(req, () => app.server.listening));
    done(null, payload);
  });
}

function drainBody(req: IncomingMessage, listening: () => boolean): void {
  const socket = req.socket;
  if (!socket || socket.destroyed) return;
  // A refused upload may still be piped into the multipart parser: discard instead.
  req.unpipe();
  linger(
    socket,
    req,
    () => req.complete,
    (inTime) => {
      // Drained in time, the connection is usable again (keep-alive) unless the server is closing.
      if (!inTime || !listening()) socket.destroy();
    },
  );
  req.resume();
}

const answered = new WeakSet<Socket>();

/** 414 when the request line alone does not fit in the header limit, else 431. */
function requestLineTooLong(raw: unknown): boolean {
  // Node puts the chunk it was parsing on the error (typed by Fastify as its JSON form).
  if (!Buffer.isBuffer(raw)) return false;
  const head = raw.subarray(0, http.maxHeaderSize + 2).toString('latin1');
  return /^[A-Z]+ /.test(head) && !head.includes('\r\n');
}

function classify(err: ConnectionError): AppError {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return requestLineTooLong(err.rawPacket)
        ? new AppError('uri_too_long', `The request line is longer than ${http.maxHeaderSize} bytes`)
        : new AppError(
            'headers_too_large',
            `The request line and headers are larger than ${http.maxHeaderSize} bytes together`,
          );
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new AppError('request_timeout', 'The request was not received in time');
    default:
      return new AppError('malformed_request', `The request is not valid HTTP/1.1 (${err.code ?? 'parse error'})`);
  }
}

/** Fastify's `clientErrorHandler`: the socket has no request object, so the answer is written raw. */
export function clientErrorHandler(this: FastifyInstance, err: ConnectionError, socket: Socket): void {
  // Node calls again for every further chunk the broken parser sees; the first call answered.
  if (err.code === 'ECONNRESET' || socket.destroyed || answered.has(socket)) return;
  answered.add(socket);
  const problem = classify(err);
  const id = randomUUID();
  this.log.info(
    { code: problem.code, status: problem.status, err_code: err.code, reqId: id },
    'request rejected by the HTTP parser',
  );
  if (!socket.writable) return void socket.destroy();
  const body = JSON.stringify(toProblem(problem, id));
  socket.end(
    `HTTP/1.1 ${problem.status} ${http.STATUS_CODES[problem.status]}\r\n` +
      'Content-Type: application/problem+json; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Request-Id: ${id}\r\n` +
      'Connection: close\r\n\r\n' +
      body,
  );
  // Half-closed: what the client is still sending is read (and thrown away by the broken parser)
  // until it stops or the bound, so that it reads the answer instead of a reset.
  linger(
    socket,
    socket,
    () => socket.readableEnded,
    () => socket.destroy(),
  );
}

/** Fastify's `frameworkErrors`: the router's refusals (bad percent-encoding, a too long path segment). */
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.header('X-Request-Id', request.id);
  const problem =
    error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? new AppError('uri_too_long', 'A path segment is longer than 100 characters')
      : error.code === 'FST_ERR_BAD_URL'
        ? new AppError('malformed_request', 'The URL is not validly percent-encoded')
        : new AppError('internal_error', 'An unexpected error occurred; quote the request id when reporting it');
  if (problem.status >= 500) request.log.error({ err: error, reqId: request.id }, 'request failed');
  void sendProblem(reply, request, problem);
}
