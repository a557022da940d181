/** Shared helpers for billing tests: a context with a billing service, and ledger assertions. */
import { afterAll, beforeAll } from 'bun:test';
import { sql } from 'drizzle-orm';
import { type BillingService, createBillingService } from '../../../src/modules/billing';
import type { AppContext } from '../../../src/app-context';
import { createTestContext, type TestContext } from '../../support/app';
import type { DbKind } from '../../support/db';

/** A test context and a billing service on it, open for the enclosing describe block. */
export function billingFixture(kind: DbKind) {
  const fixture = {} as { tc: TestContext; billing: BillingService };
  beforeAll(async () => {
    fixture.tc = await createTestContext(kind);
    fixture.billing = createBillingService(fixture.tc.ctx);
  });
  afterAll(() => fixture.tc.close());
  return fixture;
}

export async function ledgerSumMicros(ctx: AppContext, userId: string): Promise<bigint> {
  const [r] = await ctx.database.query<{ s: string }>(
    sql`select coalesce(sum(amount_micros), 0)::text as s from wallet_transactions where user_id = ${userId}`,
  );
  return BigInt(r!.s);
}
