/**
 * What the API stores or names in one language, said in the page's: payment method names by
 * provider id, and the ledger descriptions the server writes in English (the API keeps its
 * stored text; the console recognises the known patterns and shows anything else as stored).
 */
import type { Key } from './messages';

type Translate = (key: Key, vars?: Record<string, string | number>) => string;

const PROVIDERS: Record<string, Key> = { card: 'product.pay.card', chat_wallet: 'product.pay.wechat', app_wallet: 'product.pay.alipay' };

/** "chat_wallet" → "WeChat Pay" / "微信支付"; an unknown id as it is. */
export const providerName = (id: string, t: Translate) => (PROVIDERS[id] ? t(PROVIDERS[id]) : id);

const LEDGER: Array<[RegExp, (m: RegExpMatchArray, t: Translate) => string]> = [
  [/^Wallet top-up (\S+)$/, (m, t) => t('product.ledger.topup', { id: m[1]!, provider: '' })],
  [/^Top-up (\S+) \((\w+)\)$/, (m, t) => t('product.ledger.topup', { id: m[1]!, provider: providerName(m[2]!, t) })],
  [/^Refund of payment (\S+)$/, (m, t) => t('product.ledger.refund', { id: m[1]! })],
  [/^(.+) via (\S+): (\d+)\+(\d+) tokens$/, (m, t) => t('product.ledger.usage', { model: m[1]!, entrypoint: m[2]!, prompt: m[3]!, completion: m[4]! })],
];

/** A ledger description in the page's language when it is one the server writes; else as stored (an operator's reason). */
export function ledgerDescription(description: string, t: Translate): string {
  for (const [pattern, say] of LEDGER) {
    const m = description.match(pattern);
    if (m) return say(m, t).trim();
  }
  return description;
}
