/**
 * The text guard's walk: every string and key holding U+0000 or a lone UTF-16 surrogate, as JSON
 * Pointers, anywhere in a body (the quick check that skips the pointers when there is none must
 * not miss one), and deep bodies without overflowing the stack.
 */
import { describe, expect, it } from 'vitest';
import { textIssues } from '../../../../src/platform/http/text-guard.js';

const NUL = '\u0000';

describe('textIssues', () => {
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
      const issues = textIssues(value, '/body');
      expect(issues.map((i) => i.path)).toEqual([path]);
      expect(issues[0]!.code).toBe('nul_character');
    }
  });

  it('finds a lone surrogate in a string or a key; pairs (emoji, CJK extension B) pass', () => {
    const cases: Array<[unknown, string]> = [
      ['\ud800', '/body'],
      [{ name: 'North \udc00 paddock' }, '/body/name'],
      [{ crop: 'maize\ud83d' }, '/body/crop'],
      [{ 'k\udfff': 1 }, '/body/k\udfff'],
      [[1, { id: ['\udbff\ud800'] }], '/body/1/id/0'],
    ];
    for (const [value, path] of cases) {
      const issues = textIssues(value, '/body');
      expect(issues, JSON.stringify(path)).toEqual([
        { path, code: 'lone_surrogate', message: expect.stringMatching(/surrogate/) },
      ]);
    }
    expect(textIssues({ name: 'Veld 🌾 𠀀 é', 'clé 😀': ['日本'] }, '/body')).toEqual([]);
    expect(textIssues({ a: `${NUL}\ud800` }, '/body')[0]!.code).toBe('nul_character');
  });

  it('none in a large body of positions, numbers, nulls and plain strings; null-prototype objects walked', () => {
    const positions = Array.from({ length: 10_000 }, (_, i) => [
      [
        [i, i + 1],
        [i + 2, null],
      ],
    ]);
    expect(textIssues({ positions, s: 'plain', t: true, n: null }, '/body')).toEqual([]);
    const query = Object.assign(Object.create(null) as Record<string, unknown>, { field_id: `f${NUL}` });
    expect(textIssues(query, '/query').map((i) => i.path)).toEqual(['/query/field_id']);
  });

  it('a Buffer is not walked; at most 20 issues', () => {
    expect(textIssues({ file: Buffer.from([0, 0, 0]) }, '/body')).toEqual([]);
    expect(
      textIssues(
        Array.from({ length: 50 }, () => NUL),
        '/body',
      ),
    ).toHaveLength(20);
  });

  it('a body nested 100,000 deep: walked without a stack overflow', () => {
    let deep: unknown = [`end${NUL}`];
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(textIssues(deep, '/body')).toHaveLength(1);
    let clean: unknown = ['end'];
    for (let i = 0; i < 100_000; i++) clean = { a: clean };
    expect(textIssues(clean, '/body')).toEqual([]);
  });
});
