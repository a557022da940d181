/**
 * API key spend-limit grants in the database (key_spend_grants): the wallet grants' scheme applied
 * to a key's remaining budget in its current period. A grant request takes the key's advisory
 * lock, then its own grant row's lock (the row a usage commit of this holder lowers), and only
 * then reads committed spend and the other holders' live grants, in one statement: so committed
 * spend plus the live grants of the period never sum above the limit, bar the margin. A usage
 * commit adds a request's cost to router_usage_key_daily and lowers its holder's grant by the same
 * amount in one transaction, which keeps that sum unchanged for every reader.
 *
 * The admission (metering.admission.ts) calls these with the key id where the wallet has a user id.
 */
import { sql } from 'drizzle-orm';
import type { Grant, GrantAnswer, GrantRequest } from '../billing';
import type { AppContext } from '../../app-context';
import type { DbOrTx } from '../../platform/db';
import type { SpendPeriod } from './metering.key-limits.types';

/** A number only this module uses as the first half of its advisory lock keys. */
const LOCK_SPACE = 0x6b6579;

export interface KeyBudget {
  limitMicros: bigint;
  period: SpendPeriod;
  periodStart: Date;
}

type GrantRow = { amount: string; margin: boolean; version: string | number };
const grantOf = (r: GrantRow): Grant => ({ amountMicros: BigInt(r.amount), margin: r.margin, version: Number(r.version) });

/** $1: [{key_id, cost}] as JSON, $2: the holder. */
const CONSUME_SQL = `
  update key_spend_grants g set amount_micros = greatest(g.amount_micros - d.cost, 0), version = g.version + 1
  from (select key_id, sum(cost)::bigint as cost from json_to_recordset($1::text::json) as x(key_id text, cost bigint) group by 1) d
  where g.key_id = d.key_id and g.holder = $2
  returning g.key_id, g.amount_micros::text as amount, g.margin, g.version`;

export function createKeyGrants(ctx: AppContext) {
  const { database } = ctx;

  /**
   * Sets the holder's grant for the key to what it needs plus headroom (at most half of what is
   * free; all that is free when asking for the margin). balanceMicros answers the key's remaining
   * budget (limit − committed spend of the period): at or below zero the key is refused.
   */
  async function request(keyId: string, budget: KeyBudget, req: GrantRequest): Promise<GrantAnswer> {
    return database.db.transaction(async (tx) => {
      // A grant lost with a database crash is simply asked again; it need not wait for the disk.
      await database.query(sql`select set_config('synchronous_commit', 'off', true), pg_advisory_xact_lock(${LOCK_SPACE}, hashtext(${keyId}))`, tx);
      await database.query(sql`select 1 from key_spend_grants where key_id = ${keyId} and holder = ${req.holder} for update`, tx);
      const since = budget.periodStart.toISOString();
      const [row] = await database.query<GrantRow & { remaining: string }>(
        sql`
          with spent as (
            select coalesce(sum(cost_micros), 0) as spent from router_usage_key_daily where key_id = ${keyId} and day >= ${since}::timestamptz
          ), others as (
            select coalesce(sum(amount_micros), 0) as taken, coalesce(bool_or(margin), false) as margin_taken
            from key_spend_grants
            where key_id = ${keyId} and holder <> ${req.holder} and period_start = ${since}::timestamptz and expires_at > now()
          ), free as (
            select ${budget.limitMicros}::bigint - spent as remaining, greatest(${budget.limitMicros}::bigint - spent - taken, 0) as free, margin_taken
            from spent, others
          ), granted as (
            insert into key_spend_grants (key_id, holder, period_start, amount_micros, margin, version, expires_at)
            select ${keyId}, ${req.holder}, ${since}::timestamptz,
              case when ${req.margin}::boolean then free
                else least(free, ${req.needMicros}::bigint + least(${req.extraMicros}::bigint, greatest(free - ${req.needMicros}::bigint, 0) / 2)) end,
              ${req.margin}::boolean and not margin_taken, 1, now() + ${req.ttlMs}::int * interval '1 millisecond'
            from free
            on conflict (key_id, holder) do update set
              amount_micros = excluded.amount_micros,
              margin = excluded.margin or (key_spend_grants.margin and key_spend_grants.period_start = excluded.period_start),
              period_start = excluded.period_start,
              version = key_spend_grants.version + 1,
              expires_at = excluded.expires_at
            returning amount_micros::text as amount, margin, version
          )
          select granted.*, free.remaining::text as remaining from granted, free`,
        tx,
      );
      return { ...grantOf(row!), balanceMicros: BigInt(row!.remaining) };
    });
  }

  /**
   * Lowers the holder's key grants by what was just spent, in the usage commit's transaction, after
   * its rollup statement. A prepared statement, so the usage writer can send it with the others
   * in one round trip. Answers each grant touched.
   */
  function consume(on: DbOrTx, holder: string, spent: Map<string, bigint>): Promise<Array<GrantRow & { key_id: string }>> {
    const json = JSON.stringify([...spent].map(([key_id, cost]) => ({ key_id, cost: String(cost) })));
    return database.prepared<GrantRow & { key_id: string }>(CONSUME_SQL, [json, holder], on);
  }

  async function endMargin(keyId: string, holder: string): Promise<Grant | null> {
    const [row] = await database.query<GrantRow>(
      sql`update key_spend_grants set margin = false, version = version + 1 where key_id = ${keyId} and holder = ${holder}
          returning amount_micros::text as amount, margin, version`,
    );
    return row ? grantOf(row) : null;
  }

  async function giveBack(keyId: string, holder: string, version: number): Promise<void> {
    await database.query(sql`delete from key_spend_grants where key_id = ${keyId} and holder = ${holder} and version = ${version} and not margin`);
  }

  async function renewAll(holder: string, ttlMs: number): Promise<void> {
    await database.query(sql`update key_spend_grants set expires_at = now() + ${ttlMs}::int * interval '1 millisecond' where holder = ${holder}`);
  }

  /** Returns every grant of the holder (graceful stop), and removes grants that expired long ago. */
  async function releaseAll(holder: string): Promise<void> {
    await database.query(sql`delete from key_spend_grants where holder = ${holder} or expires_at < now() - interval '1 hour'`);
  }

  return { request, consume, endMargin, giveBack, renewAll, releaseAll, grantOf };
}

export type KeyGrants = ReturnType<typeof createKeyGrants>;
