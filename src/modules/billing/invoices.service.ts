/**
 * China-site e-invoices (one per paid payment) and international-site card receipts, which list
 * the payment's refunds and disputes (the routes exist only on their site; on the other they
 * answer 404).
 */
import { and, desc, eq } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { AppError } from '../../platform/errors';
import { newId } from '../../platform/ids';
import { invoices } from './billing.tables';
import { htmlAttachment, invoiceHtml, receiptHtml } from './documents';
import { toMajor } from './money';
import { type MoneyAudit, NO_MONEY_AUDIT } from './events';
import { type BillingEvents, NO_EVENTS, type Payments } from './payments.service';
import type { Refunds } from './refunds.service';

/**
 * A PRC taxpayer id: the 18-character unified social credit code (GB 32100-2015 alphabet: digits
 * and capitals without I, O, S, V, Z), or a legacy 15/17/20-character registration number.
 */
const TAX_ID = /^(?:[0-9A-HJ-NP-RTUW-Y]{18}|[0-9A-Z]{15}|[0-9A-Z]{17}|[0-9A-Z]{20})$/;

type Invoice = typeof invoices.$inferSelect;

export function createInvoices(ctx: AppContext, paymentsService: Payments, refunds: Refunds, events: BillingEvents = NO_EVENTS, audit: MoneyAudit = NO_MONEY_AUDIT) {
  const { db } = ctx.database;
  const { config } = ctx;
  const siteName = config.site === 'intl' ? 'cpd International' : 'cpd China';

  async function requirePaid(userId: string, paymentId: string) {
    const p = await paymentsService.requireOwn(userId, paymentId);
    if (p.status !== 'paid') throw new AppError('not_found', 'payment is not paid');
    return p;
  }

  /** An invoice for a paid payment of `userId`'s wallet (a user's or an organization's), asked for by the account `requestedBy`. */
  async function createInvoice(userId: string, input: { payment_id: string; title: string; tax_id?: string }, requestedBy: string = userId) {
    const title = input.title.trim();
    if (!title) throw new AppError('invalid', 'title is required');
    const taxId = input.tax_id?.trim().toUpperCase() || null;
    if (taxId !== null && !TAX_ID.test(taxId)) throw new AppError('invalid', 'tax_id is not a valid taxpayer id');
    const p = await requirePaid(userId, input.payment_id);
    // invoice.issued commits with the invoice.
    const inserted = await db.transaction(async (tx) => {
      const rows = await tx
        .insert(invoices)
        .values({
          id: newId('inv'),
          paymentId: p.id,
          userId,
          title,
          taxId,
          amountMicros: p.amountMicros,
          currency: p.currency,
          status: 'issued',
          createdAt: ctx.clock.now(),
        })
        .onConflictDoNothing()
        .returning();
      if (rows[0]) {
        const data = { invoice_id: rows[0].id, payment_id: p.id, amount: toMajor(p.amountMicros), currency: p.currency };
        await events.record(tx, { userId, type: 'invoice.issued', data });
        await audit.record(tx, { walletId: userId, action: 'invoice.issue', actorId: requestedBy, details: { ...data, title, tax_id: taxId } });
      }
      return rows;
    });
    if (inserted[0]) return invoiceView(inserted[0]);
    const existing = (await invoiceFor(userId, p.id))!;
    throw new AppError('conflict', 'an invoice already exists for this payment', {}, invoiceView(existing));
  }

  async function invoiceFor(userId: string, paymentId: string): Promise<Invoice | undefined> {
    const [inv] = await db.select().from(invoices).where(and(eq(invoices.paymentId, paymentId), eq(invoices.userId, userId)));
    return inv;
  }

  async function listInvoices(userId: string) {
    const rows = await db.select().from(invoices).where(eq(invoices.userId, userId)).orderBy(desc(invoices.createdAt), desc(invoices.id));
    return { invoices: rows.map(invoiceView) };
  }

  async function downloadInvoice(userId: string, paymentId: string): Promise<Response> {
    const inv = await invoiceFor(userId, paymentId);
    if (!inv) throw new AppError('not_found', 'no invoice issued for this payment');
    const p = await paymentsService.requireOwn(userId, paymentId);
    return htmlAttachment(invoiceHtml({ ...inv, paidAt: p.paidAt, siteName }), `invoice-${inv.id}.html`);
  }

  async function downloadReceipt(caller: { userId: string; email: string | null }, paymentId: string): Promise<Response> {
    const p = await requirePaid(caller.userId, paymentId);
    if (p.provider !== 'card') throw new AppError('not_found', 'receipts exist for card payments only');
    return htmlAttachment(
      receiptHtml({ ...p, paymentId: p.id, paidAt: p.paidAt!, email: caller.email, siteName, refunds: await refunds.heldOf(p.id) }),
      `receipt-${p.id}.html`,
    );
  }

  return { createInvoice, listInvoices, downloadInvoice, downloadReceipt };
}

function invoiceView(inv: Invoice) {
  return {
    id: inv.id,
    payment_id: inv.paymentId,
    title: inv.title,
    tax_id: inv.taxId,
    amount: toMajor(inv.amountMicros),
    currency: inv.currency,
    status: inv.status,
    created_at: inv.createdAt.toISOString(),
  };
}
