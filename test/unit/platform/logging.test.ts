/**
 * The runtime's background log (platform/logging.ts) writes pino JSON lines, as the request log
 * does: one line each, `pid` and `role` on it, the level by what is logged.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { backgroundLog, loggerOptions } from '../../../src/platform/logging.js';

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  return { lines, stream };
}

const FAILURE = {
  queue: 'batch',
  id: 'job-1',
  outcome: 'failed',
  attempt: 5,
  attempts: 5,
  error: 'the rows could not be stored',
};

describe('backgroundLog', () => {
  it('one JSON line each: a message at info, an object at warn with its members, an Error at error with its stack', async () => {
    const { lines, stream } = capture();
    const options = loggerOptions({ logLevel: 'info', role: 'worker' });
    const { transport: _none, ...jsonOnly } = options as typeof options & { transport?: unknown };
    const log = backgroundLog(pino(jsonOnly, stream));
    log('webhook secrets: 2 re-sealed under SECRETS_KEY');
    log('queue job failed; no attempt left', FAILURE);
    log('season scheduler failed', new Error('connection refused'));
    log('odd', 42);
    await new Promise((r) => setImmediate(r));
    expect(lines).toHaveLength(4);
    const [info, warn, error, odd] = lines.map((l) => JSON.parse(l));
    expect(info).toMatchObject({
      level: 30,
      msg: 'webhook secrets: 2 re-sealed under SECRETS_KEY',
      role: 'worker',
      pid: process.pid,
    });
    expect(warn).toMatchObject({ level: 40, msg: 'queue job failed; no attempt left', ...FAILURE });
    expect(error).toMatchObject({ level: 50, msg: 'season scheduler failed', err: { message: 'connection refused' } });
    expect(error.err.stack).toContain('Error: connection refused');
    expect(odd).toMatchObject({ level: 40, msg: 'odd', detail: 42 });
  });
});
