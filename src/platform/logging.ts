/**
 * The process's logs: pino JSON lines with `pid` and `role` (pino-pretty for a person at a
 * terminal). The HTTP apps log each request; the runtime's background work (queues, schedulers,
 * sweepers, the subscription poller) logs through `backgroundLog`, on the same options.
 */
import type { Logger } from 'pino';
import type { Config } from './config.js';

export function loggerOptions(config: Pick<Config, 'logLevel' | 'role'>) {
  // pino-pretty only for a person at a terminal; JSON lines for everything else.
  const pretty = process.stdout.isTTY && process.env.NODE_ENV !== 'production';
  return {
    level: config.logLevel,
    redact: ['req.headers.authorization'],
    base: { pid: process.pid, role: config.role },
    ...(pretty
      ? { transport: { target: 'pino-pretty', options: { translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname' } } }
      : {}),
  };
}

/**
 * The runtime's `log(msg, detail?)` on a pino logger: an Error at `error` (as `err`, with its
 * stack), an object's members at `warn` (a failed queue job: queue, id, outcome, attempt, …), a
 * bare message at `info`. Before, these went to stderr as text, one object over several lines.
 */
export function backgroundLog(logger: Logger): (msg: string, detail?: unknown) => void {
  return (msg, detail) => {
    if (detail === undefined) logger.info(msg);
    else if (detail instanceof Error) logger.error({ err: detail }, msg);
    else if (typeof detail === 'object' && detail !== null) logger.warn(detail, msg);
    else logger.warn({ detail }, msg);
  };
}
