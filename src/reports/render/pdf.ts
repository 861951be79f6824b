/** The PDF of each report type: what a farmer or adviser would print or forward. */
import type {
  HealthContent,
  PrescriptionContent,
  ReportContent,
  ScoutingContent,
  SeasonalContent,
} from '../content/schema.js';
import { hex, MASKED_RGB, rampColour, zoneColours } from './colormap.js';
import { paragraph, section, statusBox, table, titleBand } from './pdf-blocks.js';
import { barChart, lineChart } from './pdf-charts.js';
import { type Doc, finish, type NamedLine, newDoc } from './pdf-document.js';
import { dateRange, fixed, longDate, signed, thousands } from './pdf-format.js';
import { mapWithLegend } from './pdf-map.js';

export interface MapImage {
  png: Buffer;
  gridW: number;
  gridH: number;
  pixelSizeM: number;
  /** Pins in grid pixel coordinates. */
  pins?: Array<{ i: number; j: number; label: string }>;
}

const RAMP_STOPS = [0, 0.25, 0.5, 0.75, 1].map((f) => hex(rampColour(f)));
const crop = (c: ReportContent) => c.meta.field.crop_type ?? 'crop not set';
/** The cloud mask and weighting of the numbers, when not the defaults ('' when all are). */
function pixelRule(c: ReportContent): string {
  const o = c.meta.statistics_options;
  if (!o) return '';
  return [
    ...(o.weighting === 'coverage' ? ['Pixels weighted by their area inside the field'] : []),
    ...(o.scl_exclude
      ? [o.scl_exclude.length ? `SCL classes ${o.scl_exclude.join(', ')} excluded` : 'SCL: no class excluded']
      : []),
    ...(o.cloud_dilation_m ? [`${o.cloud_dilation_m} m around clouds and shadows excluded`] : []),
  ].join('; ');
}
const fieldLine = (c: ReportContent): NamedLine => ({
  before: '',
  name: c.meta.field.name,
  after: `  |  ${crop(c)}  |  ${thousands(c.meta.field.area_ha, 2)} ha`,
});
const footer = (c: ReportContent): NamedLine => ({
  before: `${c.meta.title} - `,
  name: c.meta.field.name,
  after: ` - ${c.meta.report_id} - generated ${c.meta.generated_at.slice(0, 16).replace('T', ' ')} UTC`,
});

function scouting(doc: Doc, c: ScoutingContent, map: MapImage): void {
  titleBand(
    doc,
    'Scouting report',
    fieldLine(c),
    [
      ['Capture', longDate(c.capture.date)],
      ['Source', c.capture.source],
      ['Usable field', `${(c.capture.usable_fraction * 100).toFixed(0)} %`],
      [`Mean ${c.meta.index}`, fixed(c.statistics.mean)],
    ],
    pixelRule(c),
  );
  statusBox(doc, c.status, c.recommendation);
  section(doc, `${c.meta.index} map and scouting points`);
  mapWithLegend(doc, {
    ...map,
    legend: {
      kind: 'ramp',
      lo: c.map.value_min,
      hi: c.map.value_max,
      title: c.meta.index,
      stops: RAMP_STOPS,
      masked: hex(MASKED_RGB),
    },
    facts: [
      ['Mean', fixed(c.statistics.mean)],
      ['Median', fixed(c.statistics.median)],
      ['Std dev', fixed(c.statistics.std)],
      ['Min / max', `${fixed(c.statistics.min, 2)} / ${fixed(c.statistics.max, 2)}`],
      ['P10 / P90', `${fixed(c.statistics.p10, 2)} / ${fixed(c.statistics.p90, 2)}`],
      ['Low threshold', fixed(c.threshold.value)],
      ['Low areas', `${c.anomalies_total.count} (${fixed(c.anomalies_total.area_ha, 2)} ha)`],
      ['Previous', c.previous ? longDate(c.previous.date) : 'none'],
      ['Change', c.previous ? signed(c.previous.change) : '-'],
    ],
  });
  section(doc, 'Problem areas to visit (ranked)');
  if (!c.anomalies.length) paragraph(doc, 'No problem area was found on this capture.');
  else {
    table(
      doc,
      [
        { header: '#', width: 22, align: 'right' },
        { header: 'Latitude', width: 60, align: 'right' },
        { header: 'Longitude', width: 60, align: 'right' },
        { header: 'Area (ha)', width: 50, align: 'right' },
        { header: '% of field', width: 50, align: 'right' },
        { header: `Mean ${c.meta.index}`, width: 58, align: 'right' },
        { header: 'Below median', width: 62, align: 'right' },
        { header: 'Severity', width: 52 },
      ],
      c.anomalies.map((a) => [
        String(a.rank),
        a.point.lat.toFixed(5),
        a.point.lon.toFixed(5),
        a.area_ha.toFixed(2),
        a.share_of_field_pct.toFixed(1),
        a.mean.toFixed(3),
        a.deficit.toFixed(3),
        a.severity,
      ]),
    );
  }
  paragraph(
    doc,
    `Method: a pixel is low when its ${c.meta.index} is below the field median minus ${c.threshold.k} robust standard deviations (1.4826 x MAD = ${c.threshold.robust_sigma.toFixed(3)}), ` +
      `i.e. below ${c.threshold.value.toFixed(3)}. Touching low pixels form an area; areas under ${c.threshold.min_area_ha} ha are ignored. Severity: high when the area's mean is at least 4 robust standard deviations under the median, moderate from 3. ` +
      `Pins mark the point of each area nearest its centre (WGS84 coordinates, ready for a phone's map app).`,
    { size: 8, colour: '#616e7c' },
  );
}

/** How the PDF names the values of a seasonal report that may be missing. */
const NOT_COMPUTED: Record<SeasonalContent['unavailable'][number]['item'], string> = {
  phases: 'Green-up, senescence, season length',
  'phases.green_up': 'Green-up',
  'phases.senescence': 'Senescence',
  'phases.season_length_days': 'Season length',
  baseline: 'Baseline',
  amplitude: 'Amplitude',
  auc: 'Area under the curve',
  yield_potential: 'Yield potential',
};

function seasonal(doc: Doc, c: SeasonalContent): void {
  const few = c.unavailable.some((u) => u.item === 'phases');
  const phase = (d: string | null) => (d ? longDate(d) : few ? 'not computed' : 'not observed');
  titleBand(
    doc,
    'Seasonal analysis',
    fieldLine(c),
    [
      ['Period', dateRange(c.period.start, c.period.end)],
      [`Peak ${c.meta.index}`, `${c.peak.value.toFixed(3)} on ${longDate(c.peak.date)}`],
      ['Green-up', phase(c.phases.green_up)],
      ['Senescence', phase(c.phases.senescence)],
      ['Season length', c.phases.season_length_days === null ? '-' : `${c.phases.season_length_days} days`],
      ['Area under curve', c.auc ? `${c.auc.index_days.toFixed(1)} index-days` : 'not computed'],
      [
        'Yield potential',
        c.yield_potential
          ? `${(c.yield_potential.relative * 100).toFixed(0)} % (${c.yield_potential.class})`
          : 'not computed',
      ],
      ['Clear captures', `${c.series.length} (+${c.skipped_captures} cloudy)`],
    ],
    pixelRule(c),
  );
  if (c.unavailable.length) {
    section(doc, 'Not computed from these captures');
    for (const u of c.unavailable) paragraph(doc, `${NOT_COMPUTED[u.item]}: ${u.reason}`, { size: 8.5 });
  }
  section(doc, `${c.meta.index} over the season`);
  const markers = [
    ...(c.phases.green_up ? [{ date: c.phases.green_up, label: 'green-up', colour: '#1a9641' }] : []),
    { date: c.peak.date, label: 'peak', colour: '#2f6b3a' },
    ...(c.phases.senescence ? [{ date: c.phases.senescence, label: 'senescence', colour: '#d7191c' }] : []),
  ];
  lineChart(doc, {
    points: c.series.map((p) => ({ date: p.date, value: p.mean, lo: p.min, hi: p.max })),
    start: c.period.start,
    end: c.period.end,
    yLabel: `${c.meta.index} (field mean)`,
    markers,
    levels:
      c.baseline !== null && c.amplitude !== null
        ? [
            {
              value: c.baseline + c.phases.amplitude_fraction * c.amplitude,
              label: `${c.phases.amplitude_fraction * 100} % of amplitude`,
            },
          ]
        : [],
  });
  paragraph(
    doc,
    'Line: field mean of each clear capture; shaded band: lowest to highest pixel. Cloudy captures are left out, not interpolated.',
    { size: 8, colour: '#616e7c' },
  );
  section(doc, 'Yield potential');
  const yp = c.yield_potential;
  if (yp) {
    paragraph(
      doc,
      `Relative yield potential ${(yp.relative * 100).toFixed(0)} % of a well-developed reference crop: ${yp.class}.`,
    );
    paragraph(doc, `Method: ${yp.method}`, { size: 8.5 });
    for (const cav of yp.caveats) paragraph(doc, `- ${cav}`, { size: 8.5, colour: '#616e7c' });
  } else {
    paragraph(doc, 'Not computed from these captures (why: see above).');
  }
  section(doc, 'Clear captures');
  table(
    doc,
    [
      { header: 'Date', width: 80 },
      { header: 'Mean', width: 55, align: 'right' },
      { header: 'Min', width: 55, align: 'right' },
      { header: 'Max', width: 55, align: 'right' },
      { header: 'Std dev', width: 55, align: 'right' },
      { header: 'Usable %', width: 55, align: 'right' },
    ],
    c.series.map((p) => [
      longDate(p.date),
      p.mean.toFixed(3),
      fixed(p.min),
      fixed(p.max),
      fixed(p.std),
      p.valid_fraction === null ? '-' : (p.valid_fraction * 100).toFixed(0),
    ]),
    { minRowHeight: 11 },
  );
}

function health(doc: Doc, c: HealthContent): void {
  const unit = c.period.granularity === 'weekly' ? 'Week' : 'Month';
  titleBand(
    doc,
    `${c.period.granularity === 'weekly' ? 'Weekly' : 'Monthly'} health summary`,
    fieldLine(c),
    [
      ['Period', dateRange(c.period.start, c.period.end)],
      ['Latest capture', longDate(c.latest.date)],
      [`Latest ${c.meta.index}`, c.latest.mean.toFixed(3)],
      ['Trend / 30 days', `${signed(c.trend.slope_per_30_days)} (${c.trend.direction})`],
    ],
    pixelRule(c),
  );
  statusBox(doc, c.status, c.summary);
  section(doc, `${unit}ly mean ${c.meta.index}`);
  const filled = c.periods.filter((p) => p.mean !== null);
  const label = (p: HealthContent['periods'][number]) =>
    c.period.granularity === 'weekly'
      ? longDate(p.start).split(' ').slice(0, 2).join(' ')
      : longDate(p.start).split(' ').slice(1).join(' ');
  // The trend line drawn across the bars: the fitted slope through the mean of the period means.
  const m = filled.reduce((s, p) => s + p.mean!, 0) / Math.max(1, filled.length);
  const days = (Date.parse(c.periods.at(-1)!.start) - Date.parse(c.periods[0]!.start)) / 86_400_000;
  const half = (c.trend.slope_per_30_days / 30) * (days / 2);
  barChart(doc, {
    bars: c.periods.map((p) => ({ label: label(p), value: p.mean })),
    yLabel: `${c.meta.index} (mean)`,
    trend: filled.length > 1 ? { first: m - half, last: m + half } : undefined,
  });
  paragraph(
    doc,
    'Bars: mean of the clear captures in each period; dashed red line: least-squares trend. Periods without a clear capture are shown as "no data".',
    { size: 8, colour: '#616e7c' },
  );
  section(doc, 'Periods');
  table(
    doc,
    [
      { header: unit, width: 110 },
      { header: 'Captures', width: 50, align: 'right' },
      { header: 'Mean', width: 50, align: 'right' },
      { header: 'Min', width: 50, align: 'right' },
      { header: 'Max', width: 50, align: 'right' },
      { header: 'Change', width: 55, align: 'right' },
      { header: 'Change %', width: 55, align: 'right' },
    ],
    c.periods.map((p) => [
      `${longDate(p.start)} - ${longDate(p.end)}`,
      String(p.captures),
      fixed(p.mean),
      fixed(p.min),
      fixed(p.max),
      signed(p.change),
      signed(p.change_pct, 1),
    ]),
  );
  section(doc, 'Alert history');
  if (!c.alerts.length) paragraph(doc, 'No alert was triggered for this field in the period.');
  else {
    table(
      doc,
      [
        { header: 'Capture', width: 80 },
        { header: 'Alert', width: 80 },
        { header: 'Index', width: 50 },
        { header: 'Value', width: 50, align: 'right' },
        { header: 'Threshold', width: 55, align: 'right' },
        { header: 'Judged (UTC)', width: 90, align: 'right' },
      ],
      c.alerts.map((a) => [
        a.capture_date ? longDate(a.capture_date) : '-',
        a.alert_type.replace('_', ' '),
        a.index,
        a.value.toFixed(3),
        a.threshold.toFixed(3),
        a.triggered_at.slice(0, 16).replace('T', ' '),
      ]),
    );
  }
}

function prescription(doc: Doc, c: PrescriptionContent, map: MapImage): void {
  const colours = zoneColours(c.zones.length).map(hex);
  const pu = c.totals.product_unit;
  titleBand(
    doc,
    `Prescription map - ${c.product}`,
    fieldLine(c),
    [
      ['Capture', longDate(c.capture.date)],
      ['Zones', `${c.zones.length} (${c.zoning.method})`],
      ['Base rate', `${thousands(c.base_rate, c.unit === 'seeds/ha' ? 0 : 1)} ${c.unit}`],
      ['Total product', `${thousands(c.totals.product_total, pu === 'seeds' ? 0 : 1)} ${pu}`],
    ],
    pixelRule(c),
  );
  section(doc, 'Management zones');
  mapWithLegend(doc, {
    ...map,
    legend: {
      kind: 'classes',
      title: `Rate (${c.unit})`,
      entries: c.zones.map((z, k) => ({
        colour: colours[k]!,
        label: `Zone ${z.zone}: ${thousands(z.rate, c.unit === 'seeds/ha' ? 0 : c.unit === 't/ha' ? 2 : 1)}`,
      })),
    },
  });
  section(doc, 'Zones and rates');
  table(
    doc,
    [
      { header: 'Zone', width: 44 },
      { header: `${c.meta.index} mean`, width: 58, align: 'right' },
      { header: `${c.meta.index} range`, width: 80, align: 'right' },
      { header: 'Area (ha)', width: 52, align: 'right' },
      { header: 'Share %', width: 46, align: 'right' },
      { header: `Rate (${c.unit})`, width: 70, align: 'right' },
      { header: `Product (${pu})`, width: 70, align: 'right' },
    ],
    [
      ...c.zones.map((z) => [
        String(z.zone),
        z.mean_index.toFixed(3),
        `${z.min_index.toFixed(2)} - ${z.max_index.toFixed(2)}`,
        z.area_ha.toFixed(2),
        z.share_pct.toFixed(1),
        thousands(z.rate, c.unit === 'seeds/ha' ? 0 : c.unit === 't/ha' ? 2 : 1),
        thousands(z.product_total, pu === 'seeds' ? 0 : 1),
      ]),
      [
        'Total',
        '',
        '',
        c.totals.area_ha.toFixed(2),
        '100.0',
        `avg ${thousands(c.totals.average_rate, c.unit === 'seeds/ha' ? 0 : 2)}`,
        thousands(c.totals.product_total, pu === 'seeds' ? 0 : 1),
      ],
    ],
    { swatches: [...colours] },
  );
  paragraph(
    doc,
    `Zones: ${c.zoning.method === 'quantiles' ? 'equal-area classes of' : '1-D k-means clusters of'} ${c.meta.index} on ${longDate(c.capture.date)} ` +
      `(class breaks ${c.zoning.breaks.map((b) => b.toFixed(3)).join(', ')}); ${c.zoning.merged_fragments} fragment(s) under ${c.zoning.min_zone_ha} ha merged into their neighbours; ` +
      `cloud-masked pixels take the zone of their nearest neighbour. Rates: ${c.rate_direction === 'inverse' ? 'more product where the index is low' : 'more product where the index is high'}, ` +
      `at most ${(c.rate_spread * 100).toFixed(0)} % from the base rate, the field average staying at the base rate. Zone areas are geodesic and add up to the field's ${c.totals.field_area_ha.toFixed(2)} ha. ` +
      'The JSON format holds each zone as a WGS84 polygon; the CSV carries the same zones as WKT for import into farm software.',
    { size: 8, colour: '#616e7c' },
  );
}

export async function renderPdf(type: string, c: ReportContent, map?: MapImage): Promise<Buffer> {
  const doc = newDoc(`${c.meta.title} - ${c.meta.field.name}`, `${type} report for field ${c.meta.field.id}`);
  if ((type === 'scouting' || type === 'prescription') && !map) throw new Error(`a ${type} PDF needs its map image`);
  if (type === 'scouting') scouting(doc, c as ScoutingContent, map!);
  else if (type === 'seasonal') seasonal(doc, c as SeasonalContent);
  else if (type === 'health_summary') health(doc, c as HealthContent);
  else if (type === 'prescription') prescription(doc, c as PrescriptionContent, map!);
  else throw new Error(`no PDF layout for ${type}`);
  return finish(doc, footer(c));
}
