/**
 * The NUL guard's walk: every string and key holding U+0000, as JSON Pointers, anywhere in a body
 * (the quick check that skips the pointers when there is none must not miss one), and deep bodies
 * without overflowing the stack.
 */
import { describe, expect, it } from 'vitest';
import { nulIssues } from '../../../../src/platform/http/nul-guard.js';

const NUL = '\u0000';

describe('nulIssues', () => {
  it('finds a NUL in a string or a key at any depth, under arrays and objects', () => {
    const cases: Array<[unknown, string]> = [
      [`a${NUL}`, '/body'],
      [{ name: `x${NUL}y` }, '/body/name'],
      [{ [`k${NUL}`]: 1 }, `/body/k${NUL}`],
      [[1, 2, [3, [4, `s${NUL}`]]], '/body/2/1/1'],
      [
        { features: { features: [{ properties: { id: 'a' } }, { properties: { id: `b${NUL}` } }] } },
        '/body/features/features/1/properties/id',
      ],
      [{ 'a/b': { 'c~d': [NUL] } }, '/body/a~1b/c~0d/0'],
    ];
    for (const [value, path] of cases) {
      const issues = nulIssues(value, '/body');
      expect(issues.map((i) => i.path)).toEqual([path]);
      expect(issues[0]!.code).toBe('nul_character');
    }
  });

  it('none in a large body of positions, numbers, nulls and plain strings; null-prototype objects walked', () => {
    const positions = Array.from({ length: 10_000 }, (_, i) => [
      [
        [i, i + 1],
        [i + 2, null],
      ],
    ]);
    expect(nulIssues({ positions, s: 'plain', t: true, n: null }, '/body')).toEqual([]);
    const query = Object.assign(Object.create(null) as Record<string, unknown>, { field_id: `f${NUL}` });
    expect(nulIssues(query, '/query').map((i) => i.path)).toEqual(['/query/field_id']);
  });

  it('a Buffer is not walked; at most 20 issues', () => {
    expect(nulIssues({ file: Buffer.from([0, 0, 0]) }, '/body')).toEqual([]);
    expect(
      nulIssues(
        Array.from({ length: 50 }, () => NUL),
        '/body',
      ),
    ).toHaveLength(20);
  });

  it('a body nested 100,000 deep: walked without a stack overflow', () => {
    let deep: unknown = [`end${NUL}`];
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(nulIssues(deep, '/body')).toHaveLength(1);
    let clean: unknown = ['end'];
    for (let i = 0; i < 100_000; i++) clean = { a: clean };
    expect(nulIssues(clean, '/body')).toEqual([]);
  });
});
