/**
 * The app's named rate limits, their defaults and the RATE_LIMITS syntax. Plain data, no HTTP:
 * configuration reads RATE_LIMITS through parseRateLimits, platform/http/rate-limit.ts enforces.
 */

export interface RateLimit {
  capacity: number;
  refillPerSec: number;
}

/**
 * Each is a token bucket per key (an identifier, a client address, a credential); `capacity` is
 * the burst, refilled at `refillPerSec`. Override any of them with RATE_LIMITS, e.g.
 * `RATE_LIMITS=login=20/1m,gateway=1200/1m` (N/duration: a burst of N, refilled at N per duration).
 */
export const namedLimits = {
  /** Failed logins, per identifier+address; a successful login costs nothing. */
  login: { capacity: 10, refillPerSec: 10 / 60 },
  /** Failed logins per client address, whatever the identifier (one address spraying many accounts; several users may share it behind NAT). */
  login_address: { capacity: 30, refillPerSec: 30 / 60 },
  /** Registrations, per email and per client address. */
  register: { capacity: 10, refillPerSec: 10 / 3600 },
  /** Sign-ins with a provider started (each stores a state row until its callback), per client address. */
  oauth_start: { capacity: 30, refillPerSec: 30 / 60 },
  /** 2FA code attempts (verify, enable, disable), per challenge or account and per client address. */
  twofa: { capacity: 10, refillPerSec: 10 / 60 },
  /** Model downloads, per credential (session user or API key). */
  download: { capacity: 60, refillPerSec: 60 / 60 },
  /** Gateway requests, per API key. */
  gateway: { capacity: 600, refillPerSec: 600 / 60 },
  /** Agent API requests without a credential (open mode), per client address. */
  agents_anonymous: { capacity: 60, refillPerSec: 60 / 60 },
} satisfies Record<string, RateLimit>;

export type LimitName = keyof typeof namedLimits;
export const LIMIT_NAMES = Object.keys(namedLimits) as LimitName[];

/** Parses RATE_LIMITS (`name=N/duration,…`); throws on an unknown name or a malformed value. */
export function parseRateLimits(raw: string, parseDurationMs: (raw: string) => number): Partial<Record<LimitName, RateLimit>> {
  const out: Partial<Record<LimitName, RateLimit>> = {};
  for (const entry of raw.split(',').map((s) => s.trim()).filter(Boolean)) {
    const m = /^(\w+)=(\d+)\/(.+)$/.exec(entry);
    if (!m) throw new Error(`"${entry}" is not name=N/duration (example: login=10/1m)`);
    const name = m[1] as LimitName;
    if (!LIMIT_NAMES.includes(name)) throw new Error(`"${m[1]}" is not one of ${LIMIT_NAMES.join(', ')}`);
    const capacity = Number(m[2]);
    if (capacity < 1) throw new Error(`${name}: the burst must be at least 1`);
    out[name] = { capacity, refillPerSec: capacity / (parseDurationMs(m[3]!) / 1000) };
  }
  return out;
}
