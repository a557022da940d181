/**
 * The checkers configuration is built from: each reads one raw value and returns it typed, or
 * throws ConfigError naming the variable (the CLI prints that one line and exits 2).
 * Only platform's ConfigError imported: a settings parser of the config layer (config-router.ts)
 * may use them without depending on config.ts.
 */
import { ConfigError } from './platform/errors';

export { ConfigError };

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "12h", "300s", "1500ms", or a bare number of seconds. */
export function parseDuration(variable: string, raw: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(raw.trim());
  if (!m) throw new ConfigError(variable, `"${raw}" is not a duration (examples: 300s, 12h)`);
  const ms = Number(m[1]) * DURATION_UNITS[m[2] ?? 's']!;
  if (!(ms > 0) || !Number.isFinite(ms)) throw new ConfigError(variable, 'must be a positive duration');
  return ms;
}

export function number(variable: string, raw: string, opts: { min?: number; max?: number; integer?: boolean } = {}): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n)) throw new ConfigError(variable, `"${raw}" is not a number`);
  if (opts.integer && !Number.isInteger(n)) throw new ConfigError(variable, `"${raw}" is not an integer`);
  if (opts.min !== undefined && n < opts.min) throw new ConfigError(variable, `must be at least ${opts.min}`);
  if (opts.max !== undefined && n > opts.max) throw new ConfigError(variable, `must be at most ${opts.max}`);
  return n;
}

export function oneOf<T extends string>(variable: string, raw: string, values: readonly T[]): T {
  if (!(values as readonly string[]).includes(raw)) throw new ConfigError(variable, `"${raw}" is not one of ${values.join(', ')}`);
  return raw as T;
}

export function httpUrl(variable: string, raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new ConfigError(variable, `"${raw}" is not a URL`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ConfigError(variable, 'must be an http(s) URL');
  return raw.replace(/\/+$/, '');
}

/** `a=x,b=y` → {a: x, b: y}; a key may repeat (several backends for one model). */
export function pairs(variable: string, raw: string): Array<[string, string]> {
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((entry) => {
      const i = entry.indexOf('=');
      if (i <= 0 || i === entry.length - 1) throw new ConfigError(variable, `"${entry}" is not name=value`);
      return [entry.slice(0, i).trim(), entry.slice(i + 1).trim()] as [string, string];
    });
}

export function fail(variable: string, message: string): never {
  throw new ConfigError(variable, message);
}
