import { describe, expect, it } from 'vitest';
import { assetIssues, assetKeysFor, BAND_NAMES, PRESET_NAMES } from '../../../src/subscriptions/presets.js';

describe('asset presets', () => {
  it('earth-search names the assets by common name, SCL as scl', () => {
    const keys = assetKeysFor('earth-search');
    expect(keys).toMatchObject({ B02: 'blue', B04: 'red', B08: 'nir', B8A: 'nir08', B11: 'swir16', SCL: 'scl' });
    expect(Object.keys(keys)).toHaveLength(13);
    expect(keys.B10).toBeUndefined();
  });

  it('planetary-computer and cdse name them by band: B04, B8A, SCL', () => {
    for (const preset of ['planetary-computer', 'cdse']) {
      const keys = assetKeysFor(preset);
      expect(keys).toMatchObject({ B04: 'B04', B08: 'B08', B8A: 'B8A', SCL: 'SCL' });
      expect(Object.keys(keys).sort()).toEqual([...BAND_NAMES].sort());
    }
  });

  it('an explicit map is used as given, and is a copy', () => {
    const map = { B04: 'B04_10m', B08: 'B08_10m', SCL: 'SCL_20m' };
    const keys = assetKeysFor(map);
    expect(keys).toEqual(map);
    keys.B04 = 'changed';
    expect(map.B04).toBe('B04_10m');
    // and so is a preset: changing the answer does not change the preset
    assetKeysFor('earth-search').B04 = 'x';
    expect(assetKeysFor('earth-search').B04).toBe('red');
  });

  it('refuses an unknown preset naming the known ones', () => {
    expect(() => assetKeysFor('sentinel-hub')).toThrow(
      /not a preset; use one of earth-search, planetary-computer, cdse/,
    );
    expect(assetIssues('Earth-Search')[0]?.code).toBe('unknown_preset');
    expect(PRESET_NAMES).toEqual(['earth-search', 'planetary-computer', 'cdse']);
  });

  it('refuses band names it does not know, empty asset keys and a map of SCL alone', () => {
    expect(assetIssues({ B4: 'red', B08: 'nir' })).toEqual([
      expect.objectContaining({ member: 'B4', code: 'unknown_band' }),
    ]);
    expect(assetIssues({ b04: 'red', B08: 'nir' })[0]).toMatchObject({ member: 'b04', code: 'unknown_band' });
    expect(assetIssues({ B04: ' ', B08: 'nir' })).toEqual([
      expect.objectContaining({ member: 'B04', code: 'empty_asset_key' }),
    ]);
    expect(assetIssues({ B04: 42, B08: 'nir' } as never)[0]).toMatchObject({ code: 'empty_asset_key' });
    expect(assetIssues({ SCL: 'scl' })).toEqual([expect.objectContaining({ member: '', code: 'no_band' })]);
    expect(assetIssues({})).toEqual([expect.objectContaining({ code: 'no_band' })]);
    // B10 (cirrus) is in L1C only: captures do not take it.
    expect(assetIssues({ B10: 'cirrus' })[0]).toMatchObject({ member: 'B10', code: 'unknown_band' });
    expect(() => assetKeysFor({ SCL: 'scl' })).toThrow(/at least one band/);
  });
});
