import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { sql } from 'drizzle-orm';
import { createBillingService } from '../../../src/modules/billing';
import { createTestApp, createTestContext } from '../../support/app';
import { baseEnv } from '../../support/binary';
import { createTestDatabase, type TestDatabase } from '../../support/db';
import { makeUser } from '../../support/make';

const MAIN = resolve(import.meta.dir, '../../../src/main.ts');

describe('cpd users list|disable|enable|promote|demote|password, cpd wallet adjust (--user, --org) and cpd payments refund', () => {
  let db: TestDatabase;
  let dataDir: string;
  let userId: string;
  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    dataDir = mkdtempSync(join(tmpdir(), 'cpd-ops-'));
    userId = JSON.parse((await cli('users', 'create', '--email', 'shell@ops.example', '--password', 'shell-password', '--phone', '+49 30 1234567')).stdout).id;
  });
  afterAll(async () => {
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  async function cli(...args: string[]) {
    const proc = Bun.spawn([process.execPath, MAIN, ...args], { env: { ...baseEnv(), DATABASE_URL: db.url!, DATA_DIR: dataDir }, stdout: 'pipe', stderr: 'pipe' });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { stdout, stderr, code };
  }
  const audit = () => db.database.query<{ actor_id: string | null; action: string; target: string; details: any }>(sql`select * from audit_log order by created_at, id`);
  const row = async () => (await db.database.query<{ disabled: boolean; is_admin: boolean }>(sql`select disabled, is_admin from users where id = ${userId}`))[0]!;

  test('list finds accounts by email or phone and prints the API page', async () => {
    const res = await cli('users', 'list', '--q', '1234567');
    expect(res.code).toBe(0);
    expect(JSON.parse(res.stdout)).toEqual({
      users: [{ id: userId, email: 'shell@ops.example', phone: '+49301234567', is_admin: false, disabled: false, created_at: expect.any(String), balance: 0, currency: 'USD', price_group: 'default' }],
      next_cursor: null,
    });
    expect((await cli('users', 'list', '--limit', '0')).code).toBe(2);
  });

  test('disable / enable / promote / demote by email, id or phone; each audited as the shell', async () => {
    const disabled = await cli('users', 'disable', '--user', 'shell@ops.example');
    expect(disabled.code).toBe(0);
    expect(JSON.parse(disabled.stdout)).toMatchObject({ id: userId, disabled: true, sessions_count: 0 });
    expect(await row()).toEqual({ disabled: true, is_admin: false });
    expect(JSON.parse((await cli('users', 'enable', '--user', userId)).stdout).disabled).toBe(false);
    expect(JSON.parse((await cli('users', 'promote', '--user', '+49 30 1234567')).stdout).is_admin).toBe(true);
    expect(await row()).toEqual({ disabled: false, is_admin: true });
    expect(JSON.parse((await cli('users', 'demote', '--user', userId)).stdout).is_admin).toBe(false);
    const entries = await audit();
    expect(entries.map((e) => [e.action, e.actor_id, e.target, e.details.via])).toEqual(Array(4).fill(['user.update', null, userId, 'cli']));
    const unknown = await cli('users', 'disable', '--user', 'nobody@ops.example');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr.trim().split('\n')).toEqual([expect.stringContaining('no account')]);
    expect((await cli('users', 'disable')).code).toBe(2);
  });

  test('password sets an argon2id hash and prints nothing; too short is exit 1 and changes nothing', async () => {
    const [before] = await db.database.query<{ password_hash: string }>(sql`select password_hash from users where id = ${userId}`);
    expect((await cli('users', 'password', '--user', userId, '--password', 'short')).code).toBe(1);
    const res = await cli('users', 'password', '--user', userId, '--password', 'new-shell-password');
    expect(res.code).toBe(0);
    expect(res.stdout).toBe('');
    const [after] = await db.database.query<{ password_hash: string }>(sql`select password_hash from users where id = ${userId}`);
    expect(after!.password_hash).not.toBe(before!.password_hash);
    expect(after!.password_hash).toStartWith('$argon2id$');
    expect((await audit()).at(-1)).toMatchObject({ action: 'user.password', actor_id: null, details: { via: 'cli' } });
  });

  test('wallet adjust: a signed amount with a reason, once per idempotency key; below zero needs --allow-negative', async () => {
    const credit = await cli('wallet', 'adjust', '--user', 'shell@ops.example', '--amount', '12.345678', '--reason', 'migration from the old system', '--idempotency-key', 'import-1');
    expect(credit.code).toBe(0);
    const printed = JSON.parse(credit.stdout);
    expect(printed.transaction).toMatchObject({ type: 'adjustment', amount: 12.345678, currency: 'USD', description: 'migration from the old system' });
    const replay = await cli('wallet', 'adjust', '--user', userId, '--amount', '12.345678', '--reason', 'migration from the old system', '--idempotency-key', 'import-1');
    expect(JSON.parse(replay.stdout).transaction.id).toBe(printed.transaction.id);

    const overdraw = await cli('wallet', 'adjust', '--user', userId, '--amount=-20', '--reason', 'chargeback');
    expect(overdraw.code).toBe(1);
    expect(overdraw.stderr).toContain('allow_negative');
    expect((await cli('wallet', 'adjust', '--user', userId, '--amount=-20', '--reason', 'chargeback', '--allow-negative')).code).toBe(0);
    // Not a decimal number: a usage error (2); a decimal the ledger refuses: exit 1.
    for (const [amount, code] of [['0', 1], ['1.0000001', 1], ['ten', 2], ['0x10', 2], ['1e3', 2]] as const) {
      const bad = await cli('wallet', 'adjust', '--user', userId, '--amount', amount, '--reason', 'bad');
      expect({ amount, code: bad.code }).toEqual({ amount, code });
    }
    expect((await cli('wallet', 'adjust', '--user', userId, '--amount', '1', '--reason', '')).code).toBe(1);

    const [w] = await db.database.query<{ balance: string; sum: string }>(sql`
      select (select balance_micros from wallets where user_id = ${userId})::text as balance,
             (select sum(amount_micros) from wallet_transactions where user_id = ${userId})::text as sum`);
    expect(w).toEqual({ balance: '-7654322', sum: '-7654322' });
    const adjustments = (await audit()).filter((e) => e.action === 'wallet.adjust');
    expect(adjustments).toHaveLength(2);
    expect(adjustments[0]).toMatchObject({ actor_id: null, target: userId, details: { amount: 12.345678, reason: 'migration from the old system', via: 'cli' } });
  });

  test('payments refund: a paid payment refunded once per idempotency key, the rest by default; audited as the shell', async () => {
    const tc = await createTestContext('postgres', {}, { testDb: db });
    const billing = createBillingService(tc.ctx);
    const created = await billing.payments.create(userId, { provider: 'card', amount: 30, currency: 'USD' });
    await billing.sandbox!.decide(created.id, 'paid');
    const balance = () => billing.getBalanceMicros(userId);
    const before = await balance();
    try {
      const first = await cli('payments', 'refund', '--payment', created.id, '--amount', '10', '--reason', 'requested by phone', '--idempotency-key', 'ticket-7');
      expect(first.code).toBe(0);
      expect(JSON.parse(first.stdout).payment).toMatchObject({ id: created.id, status: 'paid', refunded_amount: 10, refunds: [expect.objectContaining({ source: 'admin', status: 'succeeded' })] });
      expect((await cli('payments', 'refund', '--payment', created.id, '--amount', '10', '--reason', 'requested by phone', '--idempotency-key', 'ticket-7')).code).toBe(0);
      expect(await balance()).toBe(before - 10_000_000n);
      // Below zero needs --allow-negative: the rest (20) is more than the wallet holds now.
      await billing.debitUsage(tc.ctx.database.db, { userId, amountMicros: (await balance()) - 5_000_000n, reference: `cli-spent-${created.id}`, description: 'usage' });
      const refused = await cli('payments', 'refund', '--payment', created.id, '--reason', 'the rest');
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('allow_negative');
      const rest = await cli('payments', 'refund', '--payment', created.id, '--reason', 'the rest', '--allow-negative');
      expect(rest.code).toBe(0);
      expect(JSON.parse(rest.stdout).payment.refunded_amount).toBe(30);
      expect(await balance()).toBe(-15_000_000n);
      for (const args of [['--payment', created.id], ['--reason', 'x'], ['--payment', created.id, '--reason', 'x', '--amount', 'ten']]) expect((await cli('payments', 'refund', ...args)).code).toBe(2);
      expect((await cli('payments', 'refund', '--payment', 'pay_unknown', '--reason', 'x')).code).toBe(1);
      const refunds = (await audit()).filter((e) => e.action === 'payment.refund');
      expect(refunds.map((e) => [e.actor_id, e.target, e.details.amount, e.details.via])).toEqual([
        [null, created.id, 10, 'cli'],
        [null, created.id, 20, 'cli'],
      ]);
    } finally {
      await tc.close();
    }
  });

  test('wallet adjust --org: an organization’s wallet, in its audit log; an unknown organization is exit 1; --user and --org together exit 2', async () => {
    const t = await createTestApp('postgres', {}, { testDb: db });
    try {
      const owner = await makeUser(t);
      const org = (await t.request('POST', '/api/orgs', { token: owner.token, body: { name: 'Shell Org' } })).body.id as string;
      const credit = await cli('wallet', 'adjust', '--org', org, '--amount', '7.5', '--reason', 'contract credit', '--idempotency-key', 'contract-1');
      expect(credit.code).toBe(0);
      expect(JSON.parse(credit.stdout).transaction).toMatchObject({ type: 'adjustment', amount: 7.5, description: 'contract credit' });
      expect((await cli('wallet', 'adjust', '--org', org, '--amount', '7.5', '--reason', 'contract credit', '--idempotency-key', 'contract-1')).code).toBe(0);
      expect((await t.request('GET', `/api/billing/wallet?org_id=${org}`, { token: owner.token })).body.balance).toBe(7.5);
      const log = await t.request('GET', `/api/orgs/${org}/audit`, { token: owner.token });
      expect(log.body.entries.filter((e: { action: string }) => e.action === 'wallet.adjust')).toEqual([
        expect.objectContaining({ actor_email: null, details: expect.objectContaining({ amount: 7.5, reason: 'contract credit', via: 'cli' }) }),
      ]);
      const unknown = await cli('wallet', 'adjust', '--org', 'org_unknown', '--amount', '1', '--reason', 'x');
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toContain('organization not found');
      expect((await cli('wallet', 'adjust', '--org', org, '--user', userId, '--amount', '1', '--reason', 'x')).code).toBe(2);
      expect((await cli('wallet', 'adjust', '--amount', '1', '--reason', 'x')).code).toBe(2);
    } finally {
      await t.close();
    }
  });
});
