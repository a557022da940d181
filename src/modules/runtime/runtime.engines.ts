/** ENGINES=slug:quant[:sdk][@gpu],…: which engines `cpd serve` supervises. */
import { ConfigError } from '../../config';
import { QUANTS } from '../registry';

export interface EngineEntry {
  slug: string;
  quant: string;
  /** null: the model's newest sdk that has this quant. */
  sdk: string | null;
  /** CUDA_VISIBLE_DEVICES for this engine (e.g. "0" or "0+1" for two devices), null for none. */
  gpu: string | null;
}

const ENTRY = /^([a-z0-9][a-z0-9._-]*):([a-z0-9]+)(?::(v\d+\.\d+))?(?:@(\d+(?:\+\d+)*))?$/;

/** Throws ConfigError('ENGINES') naming the bad entry. */
export function parseEngines(raw: string | null): EngineEntry[] {
  if (!raw) return [];
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((text) => {
      const m = ENTRY.exec(text);
      if (!m) throw new ConfigError('ENGINES', `"${text}" is not slug:quant[:sdk][@gpu] (example: llama-3-8b:int4@0)`);
      if (!(QUANTS as readonly string[]).includes(m[2]!)) throw new ConfigError('ENGINES', `"${text}": quant must be one of ${QUANTS.join(', ')}`);
      return { slug: m[1]!, quant: m[2]!, sdk: m[3] ?? null, gpu: m[4]?.replaceAll('+', ',') ?? null };
    });
}

/** A file-name-safe process name, unique per entry. */
export function engineName(e: EngineEntry, index: number): string {
  return `engine-${e.slug}-${e.quant}-${index}`;
}
