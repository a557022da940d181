/**
 * Mails about the account's money: payment received, refund, low balance. Billing announces what
 * happened (a committed payment or refund, a wallet that changed); this module mails the owner,
 * or for an organization's wallet its owners and admins (found through the orgs port), named for it.
 *
 * Low balance: the owner picks a threshold (off by default). Wallet changes arrive through
 * billing's cross-process signal; they are gathered for a moment and checked in one query for
 * the accounts among them that have a threshold (nearly always none), so the gateway's debits
 * pay nothing for it. One mail per crossing: low_balance_notified_at is set by a conditional
 * UPDATE (of replicas checking the same change, one wins) and cleared once the balance is at or
 * above the threshold again.
 */
import { and, eq, inArray, isNotNull, isNull } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { AppError } from '../../platform/errors';
import type { Language } from '../../platform/http/language';
import { exactMajorToMicros, toMajor } from '../../platform/money';
import type { MoneyEvent } from '../billing';
import type { EmailAccounts } from './accounts.email';
import type { OrgManagers } from './accounts.org-port';
import { users } from './accounts.tables';

/** What the accounts module needs of the wallets (billing's service provides it). */
export interface WalletFeed {
  balances(userIds: string[]): Promise<Map<string, bigint>>;
  onBalanceChange(listener: (userId: string) => void): Promise<void>;
  onMoneyEvent(listener: (event: MoneyEvent) => void): void;
  /** Told of each crossing below the owner's threshold besides the mail (the balance.low webhook). */
  onLowBalance?(userId: string, amounts: { balanceMicros: bigint; thresholdMicros: bigint }): Promise<unknown>;
}

/** Wallet changes are checked this long after the first of a batch arrives. */
const GATHER_MS = 200;
const CHUNK = 1000;

export function createAccountNotifications(ctx: AppContext, email: EmailAccounts, mailEnabled: boolean, orgs: () => OrgManagers) {
  const { db } = ctx.database;
  const { log, config } = ctx;
  const changed = new Set<string>();
  let timer: ReturnType<typeof setTimeout> | null = null;
  let checking: Promise<void> = Promise.resolve();
  let feed: WalletFeed | null = null;

  const money = (micros: bigint, currency: string, locale: string) =>
    new Intl.NumberFormat(locale, { style: 'currency', currency, minimumFractionDigits: 2, maximumFractionDigits: 6 }).format(toMajor(micros));

  const recipientColumns = { id: users.id, email: users.email, locale: users.locale };

  async function recipient(userId: string) {
    const [row] = await db.select(recipientColumns).from(users).where(eq(users.id, userId)).limit(1);
    return row ?? null;
  }

  type Recipient = NonNullable<Awaited<ReturnType<typeof recipient>>>;

  /**
   * Who hears of a wallet's money: its account, or an organization's owners and admins (with the
   * organization's name); nobody when the wallet's owner is gone.
   */
  async function walletRecipients(walletId: string): Promise<{ people: Recipient[]; org: string | null }> {
    const user = await recipient(walletId);
    if (user) return { people: [user], org: null };
    const managers = await orgs().managers(walletId);
    if (!managers) return { people: [], org: null };
    return { people: await db.select(recipientColumns).from(users).where(inArray(users.id, managers.userIds)), org: managers.name };
  }

  async function paymentPaid(walletId: string, paymentId: string, amountMicros: bigint, currency: string) {
    const { people, org } = await walletRecipients(walletId);
    const invoice = config.site === 'cn';
    const document = invoice ? 'invoice' : 'receipt';
    const link = invoice ? email.link('/console/invoices') : email.link(`/api/billing/receipts/${paymentId}/download`);
    for (const person of people) {
      const amount = money(amountMicros, currency, email.localeOf(person));
      email.mail(person, org === null ? { kind: 'payment_received', amount, paymentId, document, link } : { kind: 'org_payment_received', org, amount, paymentId, document, link });
    }
  }

  async function refunded(walletId: string, paymentId: string, amountMicros: bigint, currency: string) {
    const { people, org } = await walletRecipients(walletId);
    for (const person of people) {
      const amount = money(amountMicros, currency, email.localeOf(person));
      email.mail(person, org === null ? { kind: 'refund', amount, paymentId } : { kind: 'org_refund', org, amount, paymentId });
    }
  }

  async function checkLowBalances(userIds: string[]) {
    for (let i = 0; i < userIds.length; i += CHUNK) {
      const watched = await db
        .select({ id: users.id, email: users.email, locale: users.locale, threshold: users.lowBalanceMicros, notifiedAt: users.lowBalanceNotifiedAt })
        .from(users)
        .where(and(inArray(users.id, userIds.slice(i, i + CHUNK)), isNotNull(users.lowBalanceMicros)));
      if (!watched.length || !feed) continue;
      const balances = await feed.balances(watched.map((w) => w.id));
      for (const w of watched) {
        const balance = balances.get(w.id) ?? 0n;
        const threshold = w.threshold!;
        if (balance < threshold && !w.notifiedAt) {
          const [won] = await db
            .update(users)
            .set({ lowBalanceNotifiedAt: ctx.clock.now() })
            .where(and(eq(users.id, w.id), eq(users.lowBalanceMicros, threshold), isNull(users.lowBalanceNotifiedAt)))
            .returning({ id: users.id });
          const locale = email.localeOf(w);
          if (won) {
            email.mail(w, { kind: 'low_balance', balance: money(balance, config.currency, locale), threshold: money(threshold, config.currency, locale), link: email.link('/console') });
            await feed.onLowBalance?.(w.id, { balanceMicros: balance, thresholdMicros: threshold });
          }
        } else if (balance >= threshold && w.notifiedAt) {
          await db.update(users).set({ lowBalanceNotifiedAt: null }).where(and(eq(users.id, w.id), eq(users.lowBalanceMicros, threshold)));
        }
      }
    }
  }

  /** The same for organizations' wallets among the changed ones, mailed to their owners and admins (mail only: their webhooks are their members'). */
  async function checkOrgLowBalances(ids: string[]) {
    for (let i = 0; i < ids.length; i += CHUNK) {
      const watched = await orgs().lowBalanceWatch(ids.slice(i, i + CHUNK));
      if (!watched.length || !feed) continue;
      const balances = await feed.balances(watched.map((w) => w.id));
      for (const w of watched) {
        const balance = balances.get(w.id) ?? 0n;
        if (balance < w.thresholdMicros && !w.notified) {
          if (await orgs().markLowBalance(w.id, w.thresholdMicros, true)) await orgLowBalanceMail(w.id, balance, w.thresholdMicros);
        } else if (balance >= w.thresholdMicros && w.notified) {
          await orgs().markLowBalance(w.id, w.thresholdMicros, false);
        }
      }
    }
  }

  async function orgLowBalanceMail(orgId: string, balance: bigint, threshold: bigint) {
    const { people, org } = await walletRecipients(orgId);
    for (const person of people) {
      const locale = email.localeOf(person);
      email.mail(person, { kind: 'org_low_balance', org: org!, balance: money(balance, config.currency, locale), threshold: money(threshold, config.currency, locale), link: email.link('/console') });
    }
  }

  function gathered() {
    timer = null;
    const ids = [...changed];
    changed.clear();
    checking = checking
      .then(async () => {
        await checkLowBalances(ids);
        if (mailEnabled) await checkOrgLowBalances(ids);
      })
      .catch((err) => log.warn({ err }, 'low balance check failed'));
  }

  /** GET /api/auth/notifications */
  async function settings(userId: string) {
    const [row] = await db.select({ threshold: users.lowBalanceMicros, locale: users.locale }).from(users).where(eq(users.id, userId)).limit(1);
    if (!row) throw new AppError('unauthorized', 'account not found');
    return { low_balance: row.threshold === null ? null : toMajor(row.threshold), currency: config.currency, language: email.localeOf(row) };
  }

  ctx.onShutdown(async () => {
    if (timer) clearTimeout(timer);
    timer = null;
    await checking;
  });

  return {
    /**
     * Starts listening to billing; resolves once wallet changes are heard. Without mail only the
     * low-balance crossings are watched, and only when someone else is told of them.
     */
    async watch(wallets: WalletFeed) {
      if (!mailEnabled && !wallets.onLowBalance) return;
      feed = wallets;
      if (mailEnabled) wallets.onMoneyEvent((event) => {
        const sent =
          event.kind === 'payment_paid'
            ? paymentPaid(event.userId, event.paymentId, event.amountMicros, event.currency)
            : refunded(event.userId, event.paymentId, event.amountMicros, event.currency);
        sent.catch((err) => log.warn({ err, event: event.kind }, 'money mail not sent'));
      });
      await wallets.onBalanceChange((userId) => {
        changed.add(userId);
        timer ??= setTimeout(gathered, GATHER_MS);
      });
    },

    settings,

    /** The owner of a webhook endpoint that was disabled after 3 days of failed deliveries hears of it. */
    async webhookDisabled(userId: string, url: string) {
      const user = await recipient(userId);
      if (user) email.mail(user, { kind: 'webhook_disabled', origin: new URL(url).origin, link: email.link('/console/webhooks') });
    },

    /**
     * PUT /api/auth/notifications {low_balance?: number | null, language?: 'en' | 'zh-CN'}: what is
     * named changes; a new threshold starts a new crossing.
     */
    async update(userId: string, input: { low_balance?: number | null; language?: Language }) {
      if (input.low_balance === undefined && input.language === undefined) throw new AppError('invalid', 'name low_balance, language or both');
      const change: Partial<typeof users.$inferInsert> = {};
      if (input.low_balance !== undefined) {
        let threshold: bigint | null = null;
        if (input.low_balance !== null) {
          threshold = exactMajorToMicros(input.low_balance);
          if (threshold === null || threshold <= 0n) throw new AppError('invalid', 'low_balance must be a positive amount with at most 6 decimals, or null to turn it off');
        }
        if (threshold !== null && !mailEnabled) throw new AppError('conflict', 'this site sends no mail: low balance mails are not available');
        Object.assign(change, { lowBalanceMicros: threshold, lowBalanceNotifiedAt: null });
      }
      if (input.language !== undefined) change.locale = input.language;
      await db.update(users).set(change).where(eq(users.id, userId));
      return settings(userId);
    },
  };
}

export type AccountNotifications = ReturnType<typeof createAccountNotifications>;
