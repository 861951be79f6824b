/**
 * Summarises V8 CPU profiles (`--cpu-prof`, e.g. written by the processes of bench/load with
 * BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=DIR"): self time by where the code lives (a package
 * under node_modules, a directory of src/, node's own modules, the garbage collector, idle) and
 * the functions with the most self time.
 *
 *   node dist/bench/profile-summary.js DIR/*.cpuprofile
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

function where(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native)';
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[0]}`;
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 13).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  const src = url.indexOf('/dist/src/');
  if (src >= 0)
    return (
      'src/' +
      url
        .slice(src + 10)
        .split('/')
        .slice(0, -1)
        .join('/')
    );
  return path.basename(url);
}

export function summarise(file: string, top = 15): string {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++)
    self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + (p.timeDeltas[i] ?? 0));
  const total = (p.endTime - p.startTime) / 1000;
  const groups = new Map<string, number>();
  const fns = new Map<string, number>();
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    const g = where(n.callFrame.url, n.callFrame.functionName);
    groups.set(g, (groups.get(g) ?? 0) + us / 1000);
    const f = `${n.callFrame.functionName || '(anonymous)'} ${g}:${n.callFrame.lineNumber + 1}`;
    fns.set(f, (fns.get(f) ?? 0) + us / 1000);
  }
  const idle = groups.get('(idle)') ?? 0;
  const busy = total - idle;
  const pct = (ms: number) => `${((100 * ms) / Math.max(1, busy)).toFixed(1)} %`;
  const lines = [
    `${path.basename(file)}: ${(total / 1000).toFixed(1)} s, busy ${(busy / 1000).toFixed(1)} s (shares of busy time)`,
  ];
  lines.push('  by place:');
  for (const [g, ms] of [...groups]
    .filter(([g]) => g !== '(idle)')
    .sort((a, b) => b[1] - a[1])
    .slice(0, top))
    lines.push(`    ${pct(ms).padStart(7)}  ${g}`);
  lines.push('  functions:');
  for (const [f, ms] of [...fns]
    .filter(([f]) => !f.startsWith('(idle)'))
    .sort((a, b) => b[1] - a[1])
    .slice(0, top))
    lines.push(`    ${pct(ms).padStart(7)}  ${f}`);
  return lines.join('\n');
}

if (process.argv[1] && import.meta.url.endsWith(path.basename(process.argv[1]))) {
  for (const f of process.argv.slice(2)) console.log(summarise(f));
}
