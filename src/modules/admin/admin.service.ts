/**
 * Operating the platform: the admin use cases that cross modules (an account with its balance, an
 * adjustment or a refund with its audit entry, a payment with its payer's email). Each write appends its audit
 * entry; the money writes do so in the same database transaction. The shell commands use the same
 * functions with the actor 'cli'.
 */
import type { AccountsService } from '../accounts';
import type { AuditActor, AuditService } from '../audit';
import type { BillingService } from '../billing';
import type { OrgDirectory } from '../orgs';
import type { AppContext } from '../../app-context';
import type { DbOrTx } from '../../platform/db';
import { toMajor } from '../../platform/money';

export interface AdminDeps {
  accounts: AccountsService;
  billing: BillingService;
  audit: AuditService;
  /** Organizations as the platform sees them (their wallets are billing's, keyed by the organization's id). */
  orgs: OrgDirectory;
  /** The pricing module's price groups: each user's group, and placing a user in one. */
  priceGroups: { namesOf(userIds: string[]): Promise<Map<string, string>>; assign(userId: string, name: string): Promise<void> };
}

export interface AdjustmentRequest {
  amount: number;
  reason: string;
  allow_negative?: boolean;
}

export interface RefundRequest {
  /** Absent: what remains unrefunded. */
  amount?: number;
  reason: string;
  allow_negative?: boolean;
}

const actorIdOf = (actor: AuditActor) => (actor === 'cli' ? null : actor.userId);

export function createAdminService(ctx: AppContext, { accounts, billing, audit, orgs, priceGroups }: AdminDeps) {
  const currency = ctx.config.currency;

  async function withBalances<T extends { id: string }>(rows: T[]) {
    const ids = rows.map((r) => r.id);
    const balances = await billing.getBalancesMicros(ids);
    const groups = await priceGroups.namesOf(ids);
    return rows.map((r) => ({ ...r, balance: toMajor(balances.get(r.id) ?? 0n), currency, price_group: groups.get(r.id)! }));
  }

  async function listUsers(query: { q?: string; limit: number; cursor?: string }) {
    const page = await accounts.listUsers(query);
    return { users: await withBalances(page.users), next_cursor: page.next_cursor };
  }

  async function getUser(id: string) {
    const [user] = await withBalances([await accounts.getUserDetail(id)]);
    return user!;
  }

  async function updateUser(actor: AuditActor, id: string, body: { disabled?: boolean; is_admin?: boolean; price_group?: string }) {
    const { price_group: group, ...flags } = body;
    const changes: Record<string, { from: boolean | string; to: boolean | string }> = {};
    // The group first (an unknown one is 400), of an account that exists (404): bad input changes nothing.
    if (group !== undefined) {
      await accounts.getUserDetail(id);
      const from = (await priceGroups.namesOf([id])).get(id)!;
      await priceGroups.assign(id, group);
      if (from !== group) changes.price_group = { from, to: group };
    }
    const { before, after } = await accounts.updateUser(actorIdOf(actor), id, flags);
    if (before.disabled !== after.disabled) changes.disabled = { from: before.disabled, to: after.disabled };
    if (before.is_admin !== after.is_admin) changes.is_admin = { from: before.is_admin, to: after.is_admin };
    await audit.record({ actor, action: 'user.update', target: id, details: { email: after.email, requested: body, changes } });
    return getUser(id);
  }

  async function setPassword(actor: AuditActor, id: string, password: string) {
    await accounts.setPassword(id, password);
    await audit.record({ actor, action: 'user.password', target: id, details: { sessions_ended: true } });
  }

  /** An account's wallet: 404 for an unknown account. */
  async function adjust(actor: AuditActor, userId: string, body: AdjustmentRequest, idempotencyKey?: string) {
    await accounts.getUserDetail(userId);
    return adjustWallet(actor, userId, body, idempotencyKey, async () => {});
  }

  /** An organization's wallet: 404 for an unknown or deleted organization. Its owners and admins see the audit entry in its log. */
  async function adjustOrg(actor: AuditActor, orgId: string, body: AdjustmentRequest, idempotencyKey?: string) {
    return adjustWallet(actor, orgId, body, idempotencyKey, (tx) => orgs.requireLive(orgId, tx));
  }

  /**
   * The entry and its audit record (whose target is the wallet's owner) commit together, after
   * `ownerExists` passed in the same transaction; a replay records nothing.
   */
  async function adjustWallet(actor: AuditActor, walletId: string, body: AdjustmentRequest, idempotencyKey: string | undefined, ownerExists: (tx: DbOrTx) => Promise<void>) {
    return ctx.database.db.transaction(async (tx) => {
      await ownerExists(tx);
      const { transaction, applied } = await billing.adjust(tx, {
        userId: walletId,
        amount: body.amount,
        reason: body.reason,
        allowNegative: body.allow_negative,
        idempotencyKey,
      });
      if (applied) {
        await audit.record(
          { actor, action: 'wallet.adjust', target: walletId, details: { transaction_id: transaction.id, amount: transaction.amount, currency, reason: body.reason, allow_negative: body.allow_negative ?? false } },
          tx,
        );
      }
      return { transaction };
    });
  }

  async function listOrgs(query: { q?: string; limit: number; cursor?: string }) {
    const { orgs: rows, next_cursor } = await orgs.list(query);
    const balances = await billing.getBalancesMicros(rows.map((o) => o.id));
    return { orgs: rows.map((o) => ({ ...o, balance: toMajor(balances.get(o.id) ?? 0n) })), next_cursor };
  }

  /** One organization with its balance and its members' emails. */
  async function getOrg(id: string) {
    const org = await orgs.get(id);
    const [balances, emails] = await Promise.all([billing.getBalancesMicros([id]), accounts.emailsOf(org.members.map((m) => m.user_id))]);
    return { ...org, balance: toMajor(balances.get(id) ?? 0n), members: org.members.map((m) => ({ ...m, email: emails.get(m.user_id) ?? null })) };
  }

  async function orgTransactions(id: string, query: { limit: number; cursor?: string }) {
    await orgs.get(id);
    return billing.ledger.listTransactions(id, query);
  }

  async function listPayments(query: { limit: number; cursor?: string; status?: string; provider?: string; user_id?: string }) {
    const page = await billing.payments.listAll({ ...query, userId: query.user_id });
    const emails = await accounts.emailsOf([...new Set(page.payments.map((p) => p.user_id))]);
    return { payments: page.payments.map((p) => ({ ...p, email: emails.get(p.user_id) ?? null })), next_cursor: page.next_cursor };
  }

  /**
   * Asks the provider now and settles (a paid report credits once), and asks about the payment's
   * admin refunds still pending there; answers the payment.
   */
  async function reconcilePayment(actor: AuditActor, id: string) {
    const before = await billing.payments.requireAny(id);
    await billing.reconcilePayment(id);
    await billing.refunds.settlePending({ paymentId: id, force: true });
    const after = await billing.payments.requireAny(id);
    await audit.record({ actor, action: 'payment.reconcile', target: id, details: { user_id: after.user_id, from: before.status, to: after.status } });
    return withEmail(after);
  }

  /**
   * Refunds a paid payment through its provider (sandbox: at once); the refund, its debit and its
   * audit entry commit together (a replay of the same Idempotency-Key records nothing). Answers
   * {payment}.
   */
  async function refundPayment(actor: AuditActor, id: string, body: RefundRequest, idempotencyKey?: string) {
    await billing.refunds.refund(
      id,
      { amount: body.amount, reason: body.reason, allowNegative: body.allow_negative, idempotencyKey },
      {
        onCreated: (tx, refund) =>
          audit.record(
            {
              actor,
              action: 'payment.refund',
              target: id,
              details: { user_id: refund.userId, refund_id: refund.id, amount: toMajor(refund.amountMicros), currency, reason: body.reason, allow_negative: body.allow_negative ?? false },
            },
            tx,
          ),
      },
    );
    return { payment: await withEmail(await billing.payments.requireAny(id)) };
  }

  async function withEmail<T extends { user_id: string }>(payment: T) {
    const emails = await accounts.emailsOf([payment.user_id]);
    return { ...payment, email: emails.get(payment.user_id) ?? null };
  }

  return { listUsers, getUser, updateUser, setPassword, adjust, adjustOrg, listOrgs, getOrg, orgTransactions, listPayments, reconcilePayment, refundPayment, listAudit: audit.list };
}

export type AdminService = ReturnType<typeof createAdminService>;
