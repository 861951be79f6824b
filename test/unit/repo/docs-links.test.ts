/**
 * The README and docs/ link into each other: every relative link must name a file that exists, and
 * every `#anchor` a heading of the page it points at (GitHub's slug rules, duplicates suffixed -1, -2).
 * The README stays a newcomer's five minutes: under 200 lines.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../../../src/platform/paths.js';

const pages = [
  'README.md',
  'bench/README.md',
  ...readdirSync(path.join(packageRoot, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const m = !fenced && /^#{1,6}\s+(.*)$/.exec(line);
    if (!m) continue;
    const slug = m[1]
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

describe('documentation', () => {
  it('README.md is under 200 lines', () => {
    expect(readFileSync(path.join(packageRoot, 'README.md'), 'utf8').split('\n').length).toBeLessThan(200);
  });

  it.each(pages)('every relative link in %s resolves', (page) => {
    const text = readFileSync(path.join(packageRoot, page), 'utf8').replace(/```[\s\S]*?```/g, '');
    const broken: string[] = [];
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/i.test(target)) continue;
      const [file, anchor] = target.split('#');
      const resolved = file
        ? path.resolve(path.dirname(path.join(packageRoot, page)), file)
        : path.join(packageRoot, page);
      if (!existsSync(resolved)) broken.push(`${target} (no file)`);
      else if (anchor && resolved.endsWith('.md') && !anchors(resolved).has(anchor))
        broken.push(`${target} (no heading)`);
    }
    expect(broken).toEqual([]);
  });
});
