/**
 * GET /v1/router/cost: cost and tokens over [from, to), grouped by any of user, model, entrypoint.
 * Whole days inside the window are read from the daily rollup, whole hours at its edges from the
 * hourly rollup, and the partial hours at its two ends from router_usage (all indexed by user and
 * time), so a window of months reads days instead of millions of requests, and the answer is
 * exact to the millisecond.
 *
 * cost_usd is the exact sum of the site-currency costs converted once (USD_PER_CNY on the China
 * site): converting each request and summing the rounded values would drift low by up to half a
 * micro-unit per request (3 × 105 µCNY at 0.1378 gave 42 µUSD instead of 43).
 */
import { type SQL, sql } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { AppError } from '../../platform/errors';
import { toMajor } from '../../platform/money';
import { usdConverter } from '../metering';

export const GROUP_KEYS = ['user', 'model', 'entrypoint', 'member'] as const;
export type GroupKey = (typeof GROUP_KEYS)[number];

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
const ISO = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

export interface CostQuery {
  from?: string;
  to?: string;
  group_by?: string;
  /** 'site': each row also carries its cost in the site's currency (the console shows that one). */
  currency?: 'usd' | 'site';
}

export interface CostRow {
  user?: string;
  /** An organization's member (email) whose keys made the requests. */
  member?: string;
  model?: string;
  entrypoint?: string;
  cost_usd: number;
  /** In the site's currency, when asked for with currency=site. */
  cost?: number;
  currency?: string;
  tokens: number;
}

export function parseTime(name: string, raw: string): Date {
  const d = new Date(raw);
  if (!ISO.test(raw.trim()) || Number.isNaN(d.getTime())) throw new AppError('invalid', `${name} must be an ISO 8601 timestamp`);
  return d;
}

export function parseGroupBy(raw: string | undefined): GroupKey[] {
  const keys: GroupKey[] = [];
  for (const part of (raw ?? '').split(',').map((s) => s.trim()).filter(Boolean)) {
    if (!(GROUP_KEYS as readonly string[]).includes(part)) throw new AppError('invalid', `group_by: "${part}" is not one of ${GROUP_KEYS.join(', ')}`);
    if (!keys.includes(part as GroupKey)) keys.push(part as GroupKey);
  }
  return keys;
}

export interface CostReportDeps {
  emailsOf: (userIds: string[]) => Promise<Map<string, string>>;
  /** Creators of API keys by key id (accounts): an organization's key's member. */
  keyCreatorsOf: (keyIds: string[]) => Promise<Map<string, string>>;
}

/** Whose cost: a user's own (everyone's for an admin), or (`org`) an organization's wallet. */
export interface CostScope {
  userId: string;
  isAdmin: boolean;
  org?: boolean;
}

export function createCostReport(ctx: AppContext, deps: CostReportDeps) {
  const { emailsOf } = deps;
  const toUsd = usdConverter(ctx.config.site, ctx.config.usdPerCny);
  const reports = ctx.reportDatabase ?? ctx.database;
  const column: Record<Exclude<GroupKey, 'member'>, SQL> = { user: sql.raw('user_id'), model: sql.raw('model'), entrypoint: sql.raw('entrypoint') };

  /**
   * An organization's cost by member: its requests' keys, each mapped to the member who made it.
   * Read from router_usage (the rollups have no key), which an organization's window keeps small.
   */
  async function byMember(scope: CostScope, q: CostQuery, from: Date, to: Date, groups: GroupKey[]) {
    const cols = groups.filter((g): g is 'model' | 'entrypoint' => g === 'model' || g === 'entrypoint').map((g) => column[g]);
    const rows = await reports.query<Record<string, string>>(sql`
      select key_id, ${cols.length ? sql`${sql.join(cols, sql`, `)}, ` : sql``}sum(prompt_tokens + completion_tokens)::text as tokens, sum(cost_micros)::text as cost_micros
      from router_usage
      where user_id = ${scope.userId} and created_at >= ${from.toISOString()}::timestamptz and created_at < ${to.toISOString()}::timestamptz
      group by key_id${cols.length ? sql`, ${sql.join(cols, sql`, `)}` : sql``}`);
    const creators = await deps.keyCreatorsOf([...new Set(rows.flatMap((r) => (r.key_id ? [r.key_id] : [])))]);
    const emails = await emailsOf([...new Set(creators.values())]);
    const merged = new Map<string, { member: string; model?: string; entrypoint?: string; tokens: bigint; cost: bigint }>();
    for (const r of rows) {
      const creator = r.key_id ? creators.get(r.key_id) : undefined;
      const member = creator ? (emails.get(creator) ?? creator) : 'unknown';
      const at = JSON.stringify([member, r.model, r.entrypoint]);
      const m = merged.get(at) ?? { member, model: r.model, entrypoint: r.entrypoint, tokens: 0n, cost: 0n };
      m.tokens += BigInt(r.tokens!);
      m.cost += BigInt(r.cost_micros!);
      merged.set(at, m);
    }
    const items = [...merged.values()]
      .sort((a, b) => (a.cost === b.cost ? a.member.localeCompare(b.member) : a.cost > b.cost ? -1 : 1))
      .map((m) => {
        const row: CostRow = { cost_usd: toMajor(toUsd(m.cost)), tokens: Number(m.tokens) };
        if (q.currency === 'site') Object.assign(row, { cost: toMajor(m.cost), currency: ctx.config.currency });
        if (groups.includes('user')) row.user = scope.userId;
        row.member = m.member;
        if (groups.includes('model')) row.model = m.model!;
        if (groups.includes('entrypoint')) row.entrypoint = m.entrypoint!;
        return row;
      });
    return { from: from.toISOString(), to: to.toISOString(), group_by: groups, items };
  }

  return async function cost(scope: CostScope, q: CostQuery) {
    const to = q.to ? parseTime('to', q.to) : ctx.clock.now();
    const from = q.from ? parseTime('from', q.from) : new Date(to.getTime() - 30 * DAY_MS);
    if (from > to) throw new AppError('invalid', 'from must not be after to');
    const groups = parseGroupBy(q.group_by);
    if (groups.includes('member')) {
      if (!scope.org) throw new AppError('invalid', 'group_by: "member" needs an org_id');
      return byMember(scope, q, from, to, groups);
    }

    // Daily [d1, d2), hourly [h1, d1) and [d2, h2), raw [from, h1) and [h2, to); h1 <= d1 <= d2 <= h2.
    let h1 = Math.ceil(from.getTime() / HOUR_MS) * HOUR_MS;
    let h2 = Math.floor(to.getTime() / HOUR_MS) * HOUR_MS;
    let d1 = Math.ceil(from.getTime() / DAY_MS) * DAY_MS;
    let d2 = Math.floor(to.getTime() / DAY_MS) * DAY_MS;
    if (h1 >= h2) h1 = h2 = d1 = d2 = to.getTime();
    else if (d1 >= d2) d1 = d2 = h2;
    const own = scope.isAdmin ? sql`` : sql` and user_id = ${scope.userId}`;
    const cols = groups.map((g) => column[g as Exclude<GroupKey, 'member'>]);
    const select = cols.length ? sql`${sql.join(cols, sql`, `)}, ` : sql``;
    const groupBy = cols.length ? sql` group by ${sql.join(cols, sql`, `)}` : sql``;
    const iso = (d: Date | number) => new Date(d).toISOString();
    const rows = await reports.query<Record<string, string>>(sql`
      with src as (
        select user_id, model, entrypoint, tokens, cost_micros from router_usage_daily
        where day >= ${iso(d1)}::timestamptz and day < ${iso(d2)}::timestamptz${own}
        union all
        select user_id, model, entrypoint, tokens, cost_micros from router_usage_hourly
        where ((hour >= ${iso(h1)}::timestamptz and hour < ${iso(d1)}::timestamptz)
            or (hour >= ${iso(d2)}::timestamptz and hour < ${iso(h2)}::timestamptz))${own}
        union all
        select coalesce(user_id, '') as user_id, model, entrypoint, (prompt_tokens + completion_tokens)::bigint as tokens, cost_micros
        from router_usage
        where ((created_at >= ${iso(from)}::timestamptz and created_at < ${iso(h1)}::timestamptz)
            or (created_at >= ${iso(h2)}::timestamptz and created_at < ${iso(to)}::timestamptz))${own}
      )
      select ${select}coalesce(sum(tokens), 0)::text as tokens, coalesce(sum(cost_micros), 0)::text as cost_micros
      from src${groupBy}
      order by sum(cost_micros) desc nulls last${cols.length ? sql`, ${sql.join(cols, sql`, `)}` : sql``}`);

    const emails = groups.includes('user') ? await emailsOf([...new Set(rows.map((r) => r.user_id!).filter(Boolean))]) : new Map<string, string>();
    const items: CostRow[] = rows.map((r) => {
      const row: CostRow = { cost_usd: toMajor(toUsd(BigInt(r.cost_micros!))), tokens: Number(r.tokens) };
      if (q.currency === 'site') Object.assign(row, { cost: toMajor(BigInt(r.cost_micros!)), currency: ctx.config.currency });
      if (groups.includes('user')) row.user = r.user_id ? (emails.get(r.user_id) ?? r.user_id) : 'anonymous';
      if (groups.includes('model')) row.model = r.model!;
      if (groups.includes('entrypoint')) row.entrypoint = r.entrypoint!;
      return row;
    });
    return { from: from.toISOString(), to: to.toISOString(), group_by: groups, items };
  };
}
