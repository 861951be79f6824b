/** Reading report files back the way a client would: PDF text (unpdf / pdf.js), CSV (fast-csv), JSON against its schema (ajv). */
import { parseString } from 'fast-csv';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { extractText, getDocumentProxy } from 'unpdf';
import { CONTENT_SCHEMAS } from '../../src/reports/content/schema.js';

export async function pdfText(buf: Buffer): Promise<{ text: string; pages: number }> {
  const pdf = await getDocumentProxy(new Uint8Array(buf));
  const { text, totalPages } = await extractText(pdf, { mergePages: true });
  return { text: text.replace(/\s+/g, ' '), pages: totalPages };
}

export function parseCsv(text: string): Promise<{ headers: string[]; rows: Array<Record<string, string>> }> {
  return new Promise((resolve, reject) => {
    const rows: Array<Record<string, string>> = [];
    let headers: string[] = [];
    parseString(text, { headers: true, strictColumnHandling: true })
      .on('headers', (h: string[]) => (headers = h))
      .on('data', (r: Record<string, string>) => rows.push(r))
      .on('data-invalid', (r: unknown) => reject(new Error(`invalid CSV row ${JSON.stringify(r)}`)))
      .on('error', reject)
      .on('end', () => resolve({ headers, rows }));
  });
}

const ajv = new Ajv({ allErrors: true, strict: false });
(addFormats as unknown as (a: Ajv) => void)(ajv);
const validators = Object.fromEntries(Object.entries(CONTENT_SCHEMAS).map(([k, s]) => [k, ajv.compile(s)]));

/** Errors of the content against its type's JSON Schema (empty when valid). */
export function schemaErrors(type: string, content: unknown): string[] {
  const v = validators[type]!;
  return v(content) ? [] : (v.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
}
