import { afterAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../../../src/config';
import { parseEngines } from '../../../src/modules/runtime';
import { RotatingLog } from '../../../src/modules/runtime/runtime.logs';

const work = mkdtempSync(join(tmpdir(), 'cpd-runtime-units-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('ENGINES', () => {
  test('parses slug:quant[:sdk][@gpu] entries', () => {
    expect(parseEngines('llama-3-8b:int4, qwen:int8:v1.2@0,tiny:int326@0+1')).toEqual([
      { slug: 'llama-3-8b', quant: 'int4', sdk: null, gpu: null },
      { slug: 'qwen', quant: 'int8', sdk: 'v1.2', gpu: '0' },
      { slug: 'tiny', quant: 'int326', sdk: null, gpu: '0,1' },
    ]);
    expect(parseEngines(null)).toEqual([]);
  });

  test('a bad entry is a configuration error naming ENGINES and the entry', () => {
    for (const [raw, message] of [
      ['llama', /"llama" is not slug:quant\[:sdk\]\[@gpu\]/],
      ['llama:int5', /"llama:int5": quant must be one of int4, int8, int326/],
      ['llama:int4@gpu0', /"llama:int4@gpu0" is not/],
    ] as const) {
      let caught: unknown;
      try {
        parseEngines(raw);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(ConfigError);
      expect((caught as ConfigError).variable).toBe('ENGINES');
      expect((caught as Error).message).toMatch(message);
    }
  });
});

describe('process logs', () => {
  test('rotate by size and keep a bounded number of old files', () => {
    const path = join(work, 'engine.log');
    const log = new RotatingLog(path, { maxBytes: 100, keep: 2 });
    for (let i = 0; i < 10; i++) log.write(`${String(i).repeat(60)}\n`);
    log.close();
    expect(readFileSync(path, 'utf8')).toBe(`${'9'.repeat(60)}\n`);
    expect(readFileSync(`${path}.1`, 'utf8')).toBe(`${'8'.repeat(60)}\n`);
    expect(readFileSync(`${path}.2`, 'utf8')).toBe(`${'7'.repeat(60)}\n`);
    expect(existsSync(`${path}.3`)).toBe(false);
    // Reopening appends to the current file.
    const again = new RotatingLog(path, { maxBytes: 1000, keep: 2 });
    again.write('more\n');
    again.close();
    expect(readFileSync(path, 'utf8')).toBe(`${'9'.repeat(60)}\nmore\n`);
  });
});
