/** Invoice and receipt documents: small self-contained UTF-8 HTML (no template engine needed). */
import { escapeHtml } from '../../platform/http/html';
import { microsToDecimal } from '../../platform/money';
import { toDecimalString } from './money';

/** "12.30", or every decimal a finer amount has (a sandbox refund may be any micro-unit). */
const amountText = (micros: bigint) => (micros % 10_000n === 0n ? toDecimalString(micros) : microsToDecimal(micros).replace(/0+$/, ''));

function documentHtml(lang: string, title: string, rows: Array<[string, string]>): string {
  const body = rows.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`).join('\n');
  return `<!doctype html>
<html lang="${lang}"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<style>body{font-family:sans-serif;margin:2em}th{text-align:left;padding-right:2em}</style></head>
<body><h1>${escapeHtml(title)}</h1>
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

export function invoiceHtml(inv: InvoiceDocument): string {
  return documentHtml('zh-CN', `电子发票 Invoice ${inv.id}`, [
    ['发票号码 Invoice number', inv.id],
    ['购买方 Buyer', inv.title],
    ['纳税人识别号 Tax id', inv.taxId ?? '—'],
    ['金额 Amount', `${toDecimalString(inv.amountMicros)} ${inv.currency}`],
    ['付款 Payment', inv.paymentId],
    ['付款时间 Paid at', inv.paidAt?.toISOString() ?? '—'],
    ['开票时间 Issued at', inv.createdAt.toISOString()],
    ['销售方 Seller', inv.siteName],
  ]);
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
