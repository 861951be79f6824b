/**
 * How a rate in a report's unit becomes an ISOBUS process data value (domain code). ISO 11783-11
 * gives each rate DDI a unit and a resolution; the integer a terminal reads is the rate in the
 * DDI's unit divided by that resolution:
 *
 * | unit     | DDI (hex)                                    | DDI unit, resolution | 1 unit =      | raw per unit |
 * |----------|----------------------------------------------|----------------------|---------------|--------------|
 * | kg/ha    | 6 (0006) Setpoint Mass Per Area App. Rate    | mg/m², 1             | 100 mg/m²     | 100          |
 * | t/ha     | 6 (0006)                                     | mg/m², 1             | 100,000 mg/m² | 100,000      |
 * | l/ha     | 1 (0001) Setpoint Volume Per Area App. Rate  | mm³/m², 0.01         | 100 mm³/m²    | 10,000       |
 * | seeds/ha | 11 (000B) Setpoint Count Per Area App. Rate  | /m², 0.001           | 0.0001 /m²    | 0.1          |
 *
 * A Record over every unit the API accepts: a unit added without a mapping does not compile.
 */
import type { RateUnit } from './schemas.js';

export interface RateDdi {
  ddi: number;
  /** The DDI's unit and resolution (ISO 11783-11). */
  ddiUnit: string;
  resolution: number;
  /** The DDI's unit per one report unit. */
  ddiPerUnit: number;
  /** Decimals a terminal shows in the report's unit (the rounding of content/prescription.ts). */
  decimals: number;
}

export const RATE_DDI: Record<RateUnit, RateDdi> = {
  'kg/ha': { ddi: 6, ddiUnit: 'mg/m²', resolution: 1, ddiPerUnit: 100, decimals: 1 },
  't/ha': { ddi: 6, ddiUnit: 'mg/m²', resolution: 1, ddiPerUnit: 100_000, decimals: 2 },
  'l/ha': { ddi: 1, ddiUnit: 'mm³/m²', resolution: 0.01, ddiPerUnit: 100, decimals: 1 },
  'seeds/ha': { ddi: 11, ddiUnit: '/m²', resolution: 0.001, ddiPerUnit: 0.0001, decimals: 0 },
};

/** Process data values are 32-bit signed integers (PDV values, grid type 2 cells). */
export const MAX_PROCESS_VALUE = 2_147_483_647;

/** Integer process data counts per one report unit (1 / the scale a ValuePresentation shows them with). */
export function rawPerUnit(unit: RateUnit): number {
  const d = RATE_DDI[unit];
  // 100 / 0.01 in floating point is 10000.000000000002: the factors are whole or one-tenth numbers.
  return Math.round((d.ddiPerUnit / d.resolution) * 1e6) / 1e6;
}

/** The integer a terminal reads for `rate` in `unit` (rates are already rounded to what the DDI resolves). */
export function processValue(rate: number, unit: RateUnit): number {
  return Math.round(rate * rawPerUnit(unit));
}

/** DDI as ISOXML writes it: four upper-case hex digits. */
export const ddiHex = (ddi: number) => ddi.toString(16).toUpperCase().padStart(4, '0');
