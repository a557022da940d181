import { describe, expect, test } from 'bun:test';
import { ConfigError, loadConfig } from '../../src/config';
import { AppError } from '../../src/platform/errors';
import { clientAddress } from '../../src/platform/http/client-address';
import { createLimiters, namedLimiter, namedLimits, TokenBucketLimiter } from '../../src/platform/http/rate-limit';

describe('TokenBucketLimiter', () => {
  test('allows the burst, then answers the seconds to wait; refills with time; refund gives back', () => {
    let now = 0;
    const limiter = new TokenBucketLimiter({ capacity: 3, refillPerSec: 0.5 }, () => now);
    expect([limiter.take('a'), limiter.take('a'), limiter.take('a')]).toEqual([0, 0, 0]);
    expect(limiter.take('a')).toBe(2);
    expect(limiter.take('b')).toBe(0); // buckets are per key
    now += 2000;
    expect(limiter.take('a')).toBe(0);
    expect(limiter.take('a')).toBeGreaterThan(0);
    limiter.refund('a');
    expect(limiter.take('a')).toBe(0);
  });

  test('memory is bounded: past maxKeys the least recently used bucket goes, a busy one stays', () => {
    const limiter = new TokenBucketLimiter({ capacity: 2, refillPerSec: 1 / 3600 }, () => 0, 1000);
    limiter.take('busy');
    limiter.take('busy');
    for (let i = 0; i < 50_000; i++) {
      limiter.take(`flood-${i}`);
      if (i % 100 === 0) limiter.take('busy');
    }
    expect(limiter.size).toBe(1000);
    // The busy key was touched recently: still held, still empty.
    expect(limiter.take('busy')).toBeGreaterThan(0);
    // The flood's first keys were evicted: they start full again.
    expect(limiter.take('flood-0')).toBe(0);
  });

  test('enforce throws rate_limited with Retry-After', () => {
    const limiter = new TokenBucketLimiter({ capacity: 1, refillPerSec: 1 / 60 }, () => 0);
    limiter.enforce('k');
    try {
      limiter.enforce('k');
      throw new Error('not limited');
    } catch (err) {
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).kind).toBe('rate_limited');
      expect((err as AppError).headers['retry-after']).toBe('60');
    }
  });
});

describe('named limits', () => {
  test('defaults, RATE_LIMITS overrides and the app clock', () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    const clock = { now: () => new Date(now) };
    const config = loadConfig({ RATE_LIMITS: 'download=2/1m, gateway=5/1s' });
    expect(config.rateLimits).toEqual({ download: { capacity: 2, refillPerSec: 2 / 60 }, gateway: { capacity: 5, refillPerSec: 5 } });
    const limiters = createLimiters({ config, clock });
    expect(Object.keys(limiters).sort()).toEqual(['agents_anonymous', 'download', 'gateway', 'login', 'login_address', 'oauth_start', 'register', 'twofa']);
    expect(limiters.login.limit).toEqual(namedLimits.login);
    limiters.download.enforce('u');
    limiters.download.enforce('u');
    expect(() => limiters.download.enforce('u')).toThrow(AppError);
    now += 30_000;
    expect(() => limiters.download.enforce('u')).not.toThrow();
    expect(namedLimiter({ config, clock }, 'gateway').limit.capacity).toBe(5);
  });

  test('a bad RATE_LIMITS stops start-up naming the variable', () => {
    for (const raw of ['login', 'login=10', 'nope=1/1m', 'login=0/1m', 'login=5/soon']) {
      expect(() => loadConfig({ RATE_LIMITS: raw })).toThrow(ConfigError);
      try {
        loadConfig({ RATE_LIMITS: raw });
      } catch (err) {
        expect((err as ConfigError).variable).toBe('RATE_LIMITS');
      }
    }
  });
});

describe('clientAddress', () => {
  const server = { requestIP: () => ({ address: '10.0.0.9', family: 'IPv4' as const, port: 1234 }) };
  const request = (xff?: string) => new Request('http://localhost/', { headers: xff ? { 'x-forwarded-for': xff } : {} });

  test('ignores X-Forwarded-For unless TRUST_PROXY', () => {
    expect(clientAddress(request('203.0.113.7'), server, false)).toBe('10.0.0.9');
    expect(clientAddress(request(), null, false)).toBeNull();
  });

  test('with TRUST_PROXY takes the entry our proxy appended (the last), not a forged first one', () => {
    expect(clientAddress(request('203.0.113.7'), server, true)).toBe('203.0.113.7');
    expect(clientAddress(request('1.2.3.4, 203.0.113.7'), server, true)).toBe('203.0.113.7');
    expect(clientAddress(request(), server, true)).toBe('10.0.0.9');
  });
});
