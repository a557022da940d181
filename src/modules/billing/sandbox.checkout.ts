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
import type { Language } from '../../platform/http/language';
import { PAGE_STYLE } from '../site';
import { toDecimalString } from './money';
import type { Notifications } from './notifications';
import { sandboxPagePath, signSandboxNotification } from './providers/sandbox';

const WORDS = {
  en: {
    title: 'Sandbox checkout',
    payment: 'Payment',
    colon: ': ',
    comma: ', ',
    stop: '.',
    status: 'status',
    statuses: { pending: 'pending', paid: 'paid', failed: 'failed', expired: 'expired' } as Record<string, string>,
    provider: { card: 'Card', chat_wallet: 'WeChat Pay', app_wallet: 'Alipay' } as Record<string, string>,
    isPaid: 'This payment is paid.',
    pay: 'Pay',
    fail: 'Fail',
    note: "This page stands for the provider's checkout. No money moves.",
  },
  'zh-CN': {
    title: '沙盒收银台',
    payment: '支付',
    colon: '：',
    comma: '，',
    stop: '。',
    status: '状态',
    statuses: { pending: '待支付', paid: '已支付', failed: '失败', expired: '已过期' } as Record<string, string>,
    provider: { card: '银行卡', chat_wallet: '微信支付', app_wallet: '支付宝' } as Record<string, string>,
    isPaid: '此笔支付已完成。',
    pay: '支付',
    fail: '模拟失败',
    note: '此页面代替支付服务商的收银台，不会产生真实扣款。',
  },
};

export function createSandboxCheckout(ctx: AppContext, notifications: Notifications) {
  const pageUrl = (id: string) => `${ctx.config.publicUrl}${sandboxPagePath(id)}`;

  async function requirePayment(id: string) {
    const [p] = await ctx.database.db.select().from(payments).where(eq(payments.id, id));
    if (!p) throw new AppError('not_found', 'payment not found');
    return p;
  }

  /** The page in `language` (the visitor's, as the public pages choose it). */
  async function page(id: string, language: Language): Promise<string> {
    const p = await requirePayment(id);
    const w = WORDS[language];
    const amount = `${toDecimalString(p.amountMicros)} ${p.currency}`;
    const buttons =
      p.status === 'paid'
        ? `<p>${w.isPaid}</p>`
        : `<div class="actions"><form method="post" action="${sandboxPagePath(p.id)}/pay"><button type="submit">${w.pay} ${escapeHtml(amount)}</button></form>
<form method="post" action="${sandboxPagePath(p.id)}/fail"><button type="submit" class="secondary">${w.fail}</button></form></div>`;
    return `<!doctype html>
<html lang="${language}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${w.title} ${escapeHtml(p.id)}</title>
<style>${PAGE_STYLE}
main{max-width:32rem}.actions{display:flex;gap:.75rem}.actions form{margin:0}
button{font:inherit;padding:.5rem 1rem;border:1px solid #225;border-radius:.35rem;background:#225;color:#fff;cursor:pointer}
button.secondary{background:#fff;color:#225}</style></head>
<body><header><a href="/">cpd</a></header><main><h1>${w.title}</h1>
<p>${w.payment} <code>${escapeHtml(p.id)}</code> (${escapeHtml(w.provider[p.provider] ?? p.provider)})${w.colon}<strong>${escapeHtml(amount)}</strong>${w.comma}${w.status} <strong>${escapeHtml(w.statuses[p.status] ?? p.status)}</strong>${w.stop}</p>
${buttons}
<p>${w.note}</p></main></body></html>`;
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
