/** Invoice and receipt documents: small self-contained UTF-8 HTML (no template engine needed). */
import { escapeHtml } from '../../platform/http/html';
import { microsToDecimal } from '../../platform/money';
import { toDecimalString } from './money';

/** "12.30", or every decimal a finer amount has (a sandbox refund may be any micro-unit). */
const amountText = (micros: bigint) => (micros % 10_000n === 0n ? toDecimalString(micros) : microsToDecimal(micros).replace(/0+$/, ''));

function documentHtml(lang: string, title: string, rows: Array<[string, string]>, notes: string[] = []): string {
  const body = rows.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`).join('\n');
  return `<!doctype html>
<html lang="${lang}"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<style>body{font-family:sans-serif;margin:2em}th{text-align:left;padding-right:2em}.note{border:1px solid #c90;background:#fff8e6;padding:.5em 1em}</style></head>
<body><h1>${escapeHtml(title)}</h1>
${notes.map((n) => `<p class="note">${escapeHtml(n)}</p>`).join('\n')}
<table>
${body}
</table></body></html>
`;
}

export interface InvoiceDocument {
  id: string;
  paymentId: string;
  title: string;
  taxId: string | null;
  amountMicros: bigint;
  currency: string;
  createdAt: Date;
  paidAt: Date | null;
  siteName: string;
}

/** Beijing time, as a Chinese buyer reads it: "2026-11-28 18:05:09 (UTC+8)". */
const shanghaiTime = (d: Date) =>
  `${new Intl.DateTimeFormat('sv-SE', { timeZone: 'Asia/Shanghai', dateStyle: 'short', timeStyle: 'medium' }).format(d)} (UTC+8)`;

/**
 * The record of an invoice request, not a fapiao: a fapiao is issued by the operator through the
 * tax system (docs/billing.md), so this document says so at its top and names itself a request.
 */
export function invoiceHtml(inv: InvoiceDocument): string {
  return documentHtml(
    'zh-CN',
    `开票申请记录 Invoice request ${inv.id}`,
    [
      ['申请编号 Request number', inv.id],
      ['发票抬头（购买方）Buyer', inv.title],
      ['纳税人识别号 Tax id', inv.taxId ?? '—'],
      ['金额 Amount', `${toDecimalString(inv.amountMicros)} ${inv.currency}`],
      ['付款 Payment', inv.paymentId],
      ['付款时间 Paid at', inv.paidAt ? shanghaiTime(inv.paidAt) : '—'],
      ['申请时间 Requested at', shanghaiTime(inv.createdAt)],
      ['收款方 Payee', inv.siteName],
    ],
    [
      '本文件是开票申请记录，不是发票，不能用于报销或抵扣。运营方将据此开具电子发票（增值税发票），请以税务系统开具的发票为准。',
      'This is a record of your invoice request, not a fapiao (tax invoice). The operator issues the fapiao from it through the tax system.',
    ],
  );
}

export interface ReceiptDocument {
  paymentId: string;
  /** Refunds and disputes that hold money back from the payment, oldest first. */
  refunds: Array<{ kind: string; amountMicros: bigint; createdAt: Date }>;
  provider: string;
  providerReference: string | null;
  amountMicros: bigint;
  currency: string;
  paidAt: Date;
  email: string | null;
  siteName: string;
}

export function receiptHtml(r: ReceiptDocument): string {
  const refunded = r.refunds.reduce((sum, x) => sum + x.amountMicros, 0n);
  const refundRows = r.refunds.map((x): [string, string] => [
    `${x.kind === 'dispute' ? 'Disputed' : 'Refunded'} ${x.createdAt.toISOString()}`,
    `${amountText(x.amountMicros)} ${r.currency}`,
  ]);
  return documentHtml('en', `Receipt for payment ${r.paymentId}`, [
    ['Payment', r.paymentId],
    ['Amount paid', `${toDecimalString(r.amountMicros)} ${r.currency}`],
    ['Paid at', r.paidAt.toISOString()],
    ['Method', 'Card'],
    ['Provider reference', r.providerReference ?? '—'],
    ...refundRows,
    ...(refundRows.length ? ([['Net amount', `${amountText(r.amountMicros - refunded)} ${r.currency}`]] as Array<[string, string]>) : []),
    ...(r.email ? ([['Billed to', r.email]] as Array<[string, string]>) : []),
    ['Issued by', r.siteName],
  ]);
}

/** An HTML download; filename* carries the UTF-8 name (RFC 6266). */
export function htmlAttachment(html: string, filename: string): Response {
  return new Response(html, {
    headers: {
      'content-type': 'text/html; charset=utf-8',
      'content-disposition': `attachment; filename="${filename}"; filename*=UTF-8''${encodeURIComponent(filename)}`,
    },
  });
}
