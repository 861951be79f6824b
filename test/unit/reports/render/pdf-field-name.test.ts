/**
 * The field's name at the top and the bottom of a report's pages.
 *
 * The title band of a report's first page holds the title, the field line and the note on the mask
 * and weighting. A field name of 200 characters (the most a field takes) wrapped the field line to
 * three lines and pushed the note below the band, light text on the white page; the band now keeps
 * the field line to two lines (three without a note), the name cut with an ellipsis and the crop and
 * area kept. The footer of every page (type, field name, report id, time) was cut at its width
 * wherever the text ended, so a name of more than about 40 characters took the report id off the
 * page; now the name is shortened instead. Checked on the text and positions pdf.js reads back.
 */
import { getDocumentProxy } from 'unpdf';
import { describe, expect, it } from 'vitest';
import { BAND_H, titleBand } from '../../../../src/reports/render/pdf-blocks.js';
import {
  CONTENT_W,
  finish,
  fitName,
  type NamedLine,
  newDoc,
  PAGE,
} from '../../../../src/reports/render/pdf-document.js';

interface Run {
  text: string;
  /** From the left edge of the page, and the width, in points. */
  x: number;
  width: number;
  /** Distance from the top of the page to the baseline, in points. */
  baseline: number;
  size: number;
}

const ID = 'rpt_C7vYHd475UyIY5ExYsbg1A';
async function firstPageRuns(subtitle: NamedLine, note: string, name = 'North paddock'): Promise<Run[]> {
  const doc = newDoc('t', 's');
  titleBand(doc, 'Scouting report', subtitle, [['Capture', '4 Oct 2025']], note);
  const footer = { before: 'Scouting report - ', name, after: ` - ${ID} - generated 2026-11-28 00:52 UTC` };
  const pdf = await getDocumentProxy(new Uint8Array(await finish(doc, footer)));
  const content = await (await pdf.getPage(1)).getTextContent();
  return content.items
    .filter((i): i is typeof i & { str: string; transform: number[] } => 'str' in i && i.str.trim() !== '')
    .map((i) => ({
      text: i.str,
      x: i.transform[4]!,
      width: (i as { width?: number }).width ?? 0,
      baseline: PAGE.height - i.transform[5]!,
      size: Math.abs(i.transform[3]!),
    }));
}

const longName = 'Grote Akker achter de hoeve van de familie Vandenberghe-Vermeulen, perceel '.repeat(3).slice(0, 200);
const subtitle = { before: '', name: longName, after: '  |  winter wheat after potatoes  |  64.02 ha' };
const note =
  'Pixels weighted by their area inside the field; SCL classes 3, 8, 9, 10 excluded; 20 m around clouds and shadows excluded';

describe('the title band', () => {
  it.each([
    ['with a note', note],
    ['without a note', ''],
  ])('%s: a 200-character field name stays inside the band, its text descending no lower than it', async (_, n) => {
    const runs = await firstPageRuns(subtitle, n);
    // everything above the key figures, which start at 110 pt, but the title
    const band = runs.filter((r) => r.baseline < 110 && r.size < 20);
    expect(band.length).toBeGreaterThan(0);
    // the baseline plus Helvetica's descent (0.207 em) is inside the band
    for (const r of band) expect(r.baseline + 0.207 * r.size, r.text).toBeLessThanOrEqual(BAND_H);
    const text = band.map((r) => r.text).join(' ');
    if (n) {
      expect(text).toContain(n);
      // the name cut to leave the field line two lines; the crop and area kept (pdf.js reads two spaces as one)
      expect(text).toMatch(/Vandenberghe-Vermeulen, perceel .*… \| winter wheat after potatoes \| 64\.02 ha/);
    } else expect(text).toContain(`${longName.replace(/ +$/, '')} | winter wheat after potatoes | 64.02 ha`); // three lines hold it
  });

  it('a short field line and its note are whole, on one line each', async () => {
    const runs = await firstPageRuns({ before: '', name: 'North paddock', after: '  |  maize  |  12.00 ha' }, note);
    expect(runs.map((r) => r.text)).toEqual(expect.arrayContaining(['North paddock | maize | 12.00 ha', note]));
    expect(runs.find((r) => r.text === note)!.baseline).toBeLessThan(BAND_H);
  });

  it.each([
    ['a short name', 'North paddock', 'Scouting report - North paddock - '],
    ['a name of 200 characters', longName, 'Scouting report - Grote Akker achter de hoeve'],
  ])('the footer with %s keeps the report id and time, left of the page number', async (_, name, start) => {
    const runs = await firstPageRuns({ before: '', name: 'North paddock', after: '' }, '', name);
    const page = runs.find((r) => r.text === 'Page 1 of 1')!;
    const footer = runs.find((r) => r.baseline === page.baseline && r !== page && r.text.trim())!;
    expect(footer.text.startsWith(start), footer.text).toBe(true);
    expect(footer.text.endsWith(` - ${ID} - generated 2026-11-28 00:52 UTC`), footer.text).toBe(true);
    expect(footer.x + footer.width).toBeLessThanOrEqual(PAGE.margin + CONTENT_W - 80 + 0.5);
    if (name === longName) expect(footer.text).toContain('… - rpt_');
  });

  it('fitName cuts by character: an emoji at the cut is kept whole or left out, never halved', () => {
    const line = { before: '[', name: 'ab🌾🌾🌾cd', after: ']' };
    for (let width = 0; width <= 12; width++) {
      const text = fitName(line, (s) => s.length <= width);
      expect(text, String(width)).not.toMatch(/\p{Cs}/u); // no lone surrogate
      expect(text.startsWith('[') && text.endsWith(']')).toBe(true);
    }
    expect(fitName(line, (s) => s.length <= 9)).toBe('[ab🌾🌾…]');
  });
});
