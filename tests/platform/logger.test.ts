import { describe, expect, test } from 'bun:test';
import { captureLogger } from '../support/log-sink';

describe('logger', () => {
  test('redacts secret-named fields at the top level and one level down', () => {
    const { log, lines } = captureLogger();
    log.info({ msg: 'x', password: 'p1', token: 't1', user: { authorization: 'a1', cookie: 'c1', secret: 's1', email: 'e@x' } });
    const line = JSON.parse(lines[0]!);
    expect(line).toMatchObject({ level: 'info', password: '[redacted]', token: '[redacted]' });
    expect(line.user).toEqual({ authorization: '[redacted]', cookie: '[redacted]', secret: '[redacted]', email: 'e@x' });
    expect(typeof line.time).toBe('string');
  });

  test('respects the level', () => {
    const { log, lines } = captureLogger('warn');
    log.info('quiet');
    log.warn('loud');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 'warn', msg: 'loud' });
  });
});
