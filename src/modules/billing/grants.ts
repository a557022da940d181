/**
 * Wallet grants: quotas of a balance handed to serving processes, in the manner of telecom online
 * charging (RFC 4006 credit control: a node is granted units, spends them locally, renews or
 * returns them). Every grant change locks the wallet row first, the same row a debit updates, so
 * grants and debits of one wallet are serialised and the live grants never sum above the balance.
 * The table is wallet_grants (billing.tables.ts says what each column is for).
 */
import { sql } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import type { DbOrTx } from '../../platform/db';

export interface Grant {
  amountMicros: bigint;
  margin: boolean;
  /** Orders answers about the same grant: the highest version is the latest state. */
  version: number;
}

export interface GrantAnswer extends Grant {
  /** The wallet's balance when the grant was set. */
  balanceMicros: bigint;
}

export interface GrantRequest {
  userId: string;
  holder: string;
  /** What the holder needs now: its requests in flight plus the one asking. */
  needMicros: bigint;
  /** Headroom asked on top, so that the next requests need no round trip; at most half of what is left is given. */
  extraMicros: bigint;
  /** Ask to be the one request of this wallet allowed to cross zero (granted to one holder at a time). */
  margin: boolean;
  ttlMs: number;
}

type GrantRow = { amount: string; margin: boolean; version: string | number };
const grantOf = (r: GrantRow): Grant => ({ amountMicros: BigInt(r.amount), margin: r.margin, version: Number(r.version) });

const CONSUME_SQL = `
  update wallet_grants g set amount_micros = greatest(g.amount_micros - d.cost, 0), version = g.version + 1
  from json_to_recordset($1::text::json) as d(user_id text, cost bigint)
  where g.user_id = d.user_id and g.holder = $2
  returning g.user_id, g.amount_micros::text as amount, g.margin, g.version`;

export function createGrants(ctx: AppContext) {
  const { database } = ctx;

  /** Sets the holder's grant to what it needs (all that is free when asking for the margin), within the balance. */
  async function request(req: GrantRequest): Promise<GrantAnswer> {
    return database.db.transaction(async (tx) => {
      const [w] = await database.query<{ balance: string }>(sql`select balance_micros::text as balance from wallets where user_id = ${req.userId} for update`, tx);
      const balance = BigInt(w?.balance ?? '0');
      const need = req.margin ? balance : req.needMicros;
      const [row] = await database.query<GrantRow>(
        sql`
          with others as (
            select coalesce(sum(amount_micros), 0) as taken, coalesce(bool_or(margin), false) as margin_taken
            from wallet_grants where user_id = ${req.userId} and holder <> ${req.holder} and expires_at > now()
          ), free as (
            select greatest(${balance}::bigint - taken, 0) as free, margin_taken from others
          )
          insert into wallet_grants (user_id, holder, amount_micros, margin, version, expires_at)
          select ${req.userId}, ${req.holder},
            least(free, ${need}::bigint + least(${req.extraMicros}::bigint, greatest(free - ${need}::bigint, 0) / 2)),
            ${req.margin}::boolean and not margin_taken, 1, now() + ${req.ttlMs}::int * interval '1 millisecond'
          from free
          on conflict (user_id, holder) do update set
            amount_micros = excluded.amount_micros,
            margin = wallet_grants.margin or excluded.margin,
            version = wallet_grants.version + 1,
            expires_at = excluded.expires_at
          returning amount_micros::text as amount, margin, version`,
        tx,
      );
      return { ...grantOf(row!), balanceMicros: balance };
    });
  }

  /**
   * Lowers the holder's grants by what was just debited, in the debit's transaction, after the
   * debit's statement (which holds the wallet rows' locks). A prepared statement like the ledger's,
   * so a caller may send both at once and have them run in order. Answers each grant touched.
   */
  async function consume(on: DbOrTx, holder: string, spent: Map<string, bigint>): Promise<Map<string, Grant>> {
    const grants = new Map<string, Grant>();
    if (!spent.size) return grants;
    const json = JSON.stringify([...spent].map(([user_id, cost]) => ({ user_id, cost: String(cost) })));
    const rows = await database.prepared<GrantRow & { user_id: string }>(CONSUME_SQL, [json, holder], on);
    for (const r of rows) grants.set(r.user_id, grantOf(r));
    return grants;
  }

  /** Gives the margin back (its request committed); answers the grant's new state. */
  async function endMargin(userId: string, holder: string): Promise<Grant | null> {
    const [row] = await database.query<GrantRow>(
      sql`update wallet_grants set margin = false, version = version + 1 where user_id = ${userId} and holder = ${holder}
          returning amount_micros::text as amount, margin, version`,
    );
    return row ? grantOf(row) : null;
  }

  /** Returns an idle grant, unless it changed since `version` (a renewal raced with the return). */
  async function giveBack(userId: string, holder: string, version: number): Promise<void> {
    await database.query(sql`delete from wallet_grants where user_id = ${userId} and holder = ${holder} and version = ${version} and not margin`);
  }

  /** Keeps every grant of the holder alive for ttlMs more. */
  async function renewAll(holder: string, ttlMs: number): Promise<void> {
    await database.query(sql`update wallet_grants set expires_at = now() + ${ttlMs}::int * interval '1 millisecond' where holder = ${holder}`);
  }

  /** Returns every grant of the holder (graceful stop), and removes grants that expired long ago. */
  async function releaseAll(holder: string): Promise<void> {
    await database.query(sql`delete from wallet_grants where holder = ${holder} or expires_at < now() - interval '1 hour'`);
  }

  return { request, consume, endMargin, giveBack, renewAll, releaseAll };
}

export type Grants = ReturnType<typeof createGrants>;
