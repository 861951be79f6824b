/**
 * The HTTP client geotiff.js uses for COGs: its fetch client plus a deadline on every range request
 * (IMAGERY_TIMEOUT_MS, headers and body: a server that stalls mid-body fails the read instead of
 * holding a compute thread) and a count of the bytes received (imagery_read_bytes_total{source="http"}).
 */
import { BaseClient, BaseResponse } from 'geotiff';
import { imageryTimeoutMs } from '../platform/config.js';
import { recordRead } from './metrics.js';

class TimedResponse extends BaseResponse {
  constructor(private readonly response: Response) {
    super();
  }

  override get status(): number {
    return this.response.status;
  }

  override getHeader(name: string): string | undefined {
    return this.response.headers.get(name) ?? undefined;
  }

  override async getData(): Promise<ArrayBuffer> {
    const data = await this.response.arrayBuffer();
    recordRead('http', data.byteLength);
    return data;
  }
}

export class TimedFetchClient extends BaseClient {
  constructor(url: string, private readonly timeoutMs = imageryTimeoutMs()) {
    super(url);
  }

  override async request(options: RequestInit = {}): Promise<BaseResponse> {
    const deadline = AbortSignal.timeout(this.timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
    try {
      return new TimedResponse(await fetch(this.url, { headers: options.headers, signal }));
    } catch (err) {
      if (deadline.aborted) throw new Error(`fetch failed: no answer from ${new URL(this.url).host} within ${this.timeoutMs} ms (IMAGERY_TIMEOUT_MS)`);
      throw err;
    }
  }
}
