/**
 * A throw-away certificate authority and a server certificate for 127.0.0.1/localhost, made with
 * the openssl CLI, plus a small HTTPS receiver that records what it is sent.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';

export interface TestPki {
  ca: string;
  key: string;
  cert: string;
  /** A certificate for the same names signed by a different, untrusted CA. */
  untrustedKey: string;
  untrustedCert: string;
}

function makeCa(dir: string, name: string) {
  const key = path.join(dir, `${name}.key`);
  const crt = path.join(dir, `${name}.crt`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      key,
      '-out',
      crt,
      '-days',
      '2',
      '-subj',
      `/CN=${name}`,
    ],
    { stdio: 'ignore' },
  );
  return { key, crt };
}

function makeLeaf(dir: string, name: string, ca: { key: string; crt: string }) {
  const key = path.join(dir, `${name}.key`);
  const csr = path.join(dir, `${name}.csr`);
  const crt = path.join(dir, `${name}.crt`);
  const ext = path.join(dir, `${name}.ext`);
  execFileSync(
    'openssl',
    [
      'req',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      key,
      '-out',
      csr,
      '-subj',
      '/CN=localhost',
    ],
    { stdio: 'ignore' },
  );
  execFileSync('sh', [
    '-c',
    `printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' > ${ext}`,
  ]);
  execFileSync(
    'openssl',
    [
      'x509',
      '-req',
      '-in',
      csr,
      '-CA',
      ca.crt,
      '-CAkey',
      ca.key,
      '-CAcreateserial',
      '-out',
      crt,
      '-days',
      '2',
      '-extfile',
      ext,
    ],
    { stdio: 'ignore' },
  );
  return { key: readFileSync(key, 'utf8'), cert: readFileSync(crt, 'utf8') };
}

export function makePki(): TestPki {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pki-'));
  try {
    const ca = makeCa(dir, 'test-ca');
    const rogue = makeCa(dir, 'rogue-ca');
    const leaf = makeLeaf(dir, 'server', ca);
    const bad = makeLeaf(dir, 'rogue', rogue);
    return {
      ca: readFileSync(ca.crt, 'utf8'),
      key: leaf.key,
      cert: leaf.cert,
      untrustedKey: bad.key,
      untrustedCert: bad.cert,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface Received {
  headers: Record<string, string | string[] | undefined>;
  raw: Buffer;
  body: any;
  at: number;
}

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** Decides the answer per request (default 200 at once). */
  respond: (r: Received, n: number) => { status: number; delayMs?: number };
  close(): Promise<void>;
}

/**
 * `keepAliveTimeoutMs` defaults to 1 s so that tests close fast; note that Node's client agent
 * keeps no connection to a server announcing `Keep-Alive: timeout=1` (it subtracts a second), so
 * a benchmark passes Node's default of 5 s, as a real receiver would have.
 */
export async function startReceiver(
  tlsOpts: { key: string; cert: string },
  path_ = '/hook',
  opts: { keepAliveTimeoutMs?: number } = {},
): Promise<Receiver> {
  const received: Received[] = [];
  const r: Receiver = {
    url: '',
    port: 0,
    received,
    respond: () => ({ status: 200 }),
    close: async () => {
      await new Promise<void>((res) => server.close(() => res()));
    },
  };
  const server = https.createServer({ key: tlsOpts.key, cert: tlsOpts.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let body: unknown = null;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        /* recorded raw */
      }
      const rec: Received = { headers: req.headers, raw, body, at: Date.now() };
      received.push(rec);
      const { status, delayMs } = r.respond(rec, received.length);
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(status, { 'content-type': 'text/plain' });
        res.end('ok');
      };
      if (delayMs) setTimeout(send, delayMs).unref();
      else send();
    });
  });
  server.keepAliveTimeout = opts.keepAliveTimeoutMs ?? 1000;
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  r.port = (server.address() as AddressInfo).port;
  r.url = `https://127.0.0.1:${r.port}${path_}`;
  const origClose = r.close;
  r.close = async () => {
    server.closeAllConnections();
    await origClose();
  };
  return r;
}
