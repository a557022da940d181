/**
 * The sandbox provider's own checkout: an HTML page (the card redirect target and the QR's
 * target) with Pay and Fail buttons, and the QR image as SVG. A decision is sent as the signed
 * notification a provider would send, through the webhook handling live providers use.
 */
import { eq } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { AppError } from '../../platform/errors';
import { payments } from './billing.tables';
import { escapeHtml } from '../../platform/http/html';
import { toDecimalString } from './money';
import type { Notifications } from './notifications';
import { sandboxPagePath, signSandboxNotification } from './providers/sandbox';

export function createSandboxCheckout(ctx: AppContext, notifications: Notifications) {
  const pageUrl = (id: string) => `${ctx.config.publicUrl}${sandboxPagePath(id)}`;

  async function requirePayment(id: string) {
    const [p] = await ctx.database.db.select().from(payments).where(eq(payments.id, id));
    if (!p) throw new AppError('not_found', 'payment not found');
    return p;
  }

  async function page(id: string): Promise<string> {
    const p = await requirePayment(id);
    const amount = `${toDecimalString(p.amountMicros)} ${p.currency}`;
    const buttons =
      p.status === 'paid'
        ? '<p>This payment is paid.</p>'
        : `<form method="post" action="${sandboxPagePath(p.id)}/pay"><button type="submit">Pay ${escapeHtml(amount)}</button></form>
<form method="post" action="${sandboxPagePath(p.id)}/fail"><button type="submit">Fail</button></form>`;
    return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sandbox checkout ${escapeHtml(p.id)}</title></head>
<body><h1>Sandbox checkout</h1>
<p>Payment <code>${escapeHtml(p.id)}</code> (${escapeHtml(p.provider)}): <strong>${escapeHtml(amount)}</strong>, status <strong>${escapeHtml(p.status)}</strong>.</p>
${buttons}
<p>This page stands for the provider's checkout. No money moves.</p></body></html>`;
  }

  async function qrSvg(id: string): Promise<string> {
    await requirePayment(id);
    // Imported at first use: it is off the start-up path (docs/design/start-up.md).
    const { default: QRCode } = await import('qrcode');
    return QRCode.toString(pageUrl(id), { type: 'svg', errorCorrectionLevel: 'M', margin: 2 });
  }

  /** Pay or Fail: the signed notification goes through the same path as a live provider's. */
  async function decide(id: string, status: 'paid' | 'failed'): Promise<void> {
    const p = await requirePayment(id);
    const { body, headers } = signSandboxNotification(ctx.config.secretKey(), {
      payment_id: p.id,
      status,
      amount: toDecimalString(p.amountMicros),
      currency: p.currency,
    });
    await notifications.handle(p.provider, body, headers);
  }

  return { page, qrSvg, decide };
}
