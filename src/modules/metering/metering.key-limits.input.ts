/**
 * The optional limits of an API key: allowed models (slugs or route names), a spend limit per
 * period, an expiry and a request rate. Here a request's fields are checked and turned into the
 * values the accounts module stores; metering.key-limits.ts enforces them on every gateway request.
 */
import { AppError } from '../../platform/errors';
import { exactMajorToMicros, toMajor } from '../../platform/money';
import type { KeyLimits, KeyLimitsInput, KeyPolicy } from './metering.key-limits.types';

/** The limits after `input` is applied to `current`; bad input is 400 and nothing is changed. */
export function applyLimits(current: KeyLimits, input: KeyLimitsInput, policy: KeyPolicy, now: Date, creating: boolean): KeyLimits {
  const next = { ...current };
  if (input.models !== undefined) {
    if (input.models !== null) {
      const unknown = input.models.filter((m) => !policy.isModel(m));
      if (unknown.length) throw new AppError('invalid', `models: ${unknown.map((m) => `"${m}"`).join(', ')} is no priced model or route`);
    }
    next.models = input.models === null ? null : [...new Set(input.models)];
  }
  if (input.spend_limit !== undefined) {
    if (input.spend_limit === null) next.spendLimitMicros = null;
    else {
      const micros = exactMajorToMicros(input.spend_limit);
      if (input.spend_limit < 0) throw new AppError('invalid', 'spend_limit must be zero or more');
      if (micros === null) throw new AppError('invalid', 'spend_limit must have at most 6 decimals and be below 1000000000000');
      next.spendLimitMicros = micros;
    }
  }
  if (input.spend_period !== undefined) {
    if (input.spend_period !== null && next.spendLimitMicros === null) throw new AppError('invalid', 'spend_period needs a spend_limit');
    next.spendPeriod = input.spend_period;
  }
  // A limit without a period holds for the key's whole life; no limit, no period.
  next.spendPeriod = next.spendLimitMicros === null ? null : (next.spendPeriod ?? 'total');
  if (input.expires_at !== undefined) {
    if (input.expires_at === null) next.expiresAt = null;
    else {
      const at = new Date(input.expires_at);
      if (Number.isNaN(at.getTime())) throw new AppError('invalid', 'expires_at must be an ISO 8601 time');
      if (creating && at <= now) throw new AppError('invalid', 'expires_at must be in the future');
      next.expiresAt = at;
    }
  }
  if (input.rpm !== undefined) next.rpm = input.rpm;
  return next;
}

export function limitsView(l: KeyLimits, spentMicros: bigint) {
  return {
    models: l.models,
    spend_limit: l.spendLimitMicros === null ? null : toMajor(l.spendLimitMicros),
    spend_period: l.spendPeriod,
    spent: toMajor(spentMicros),
    expires_at: l.expiresAt?.toISOString() ?? null,
    rpm: l.rpm,
  };
}

export type LimitsView = ReturnType<typeof limitsView>;
