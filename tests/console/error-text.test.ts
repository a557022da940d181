/** The console's human wording of API errors (src/console/app/error-text.ts), in both languages. */
import { describe, expect, test } from 'bun:test';
import { humanError } from '../../src/console/app/error-text';
import { type Key, messages } from '../../src/console/app/messages';
import { providerName, ledgerDescription } from '../../src/console/app/product-text';

const translate = (language: 'en' | 'zh-CN') => (key: Key, vars: Record<string, string | number> = {}) =>
  messages[language][key].replace(/\{(\w+)\}/g, (_, name: string) => String(vars[name] ?? ''));
const en = translate('en');
const zh = translate('zh-CN');

describe('humanError', () => {
  test('schema failures, as the server words them, become sentences with the field named', () => {
    expect(humanError('invalid models[0].price: must be a number', en)).toBe('Price must be a number.');
    expect(humanError('invalid models[0].price: must be a number', zh)).toBe('价格必须是数字。');
    expect(humanError('invalid password: must be at least 8 characters', en)).toBe('At least 8 characters.');
    expect(humanError('invalid password: must be at least 8 characters', zh)).toBe('至少 8 个字符。');
    expect(humanError('invalid spend_limit: must be zero or more, or null', en)).toBe('Spend limit must be zero or more.');
    expect(humanError('invalid email: is required', zh)).toBe('邮箱为必填项。');
    expect(humanError('invalid limit: must be 200 or less', en)).toBe('Limit must be 200 or less.');
    expect(humanError('invalid name: must not be empty', en)).toBe('Name must not be empty.');
  });

  test("handlers' own messages of the same shapes too; a negative spend limit is not called a decimals problem", () => {
    expect(humanError('spend_limit must be zero or more', en)).toBe('Spend limit must be zero or more.');
    expect(humanError('amount must have at most two decimals', en)).toBe('Amount has too many decimal places (at most 2).');
    expect(humanError('request body is not valid JSON', zh)).toBe('无法读取请求，请刷新页面后重试。');
  });

  test('a message of no known shape is shown as written', () => {
    expect(humanError('expires_at must be in the future', en)).toBe('expires_at must be in the future');
    expect(humanError('API key not found', zh)).toBe('API key not found');
  });
});

describe('payment and ledger text', () => {
  test('payment methods have the names people look for', () => {
    expect(providerName('chat_wallet', zh)).toBe('微信支付');
    expect(providerName('app_wallet', zh)).toBe('支付宝');
    expect(providerName('card', en)).toBe('Card');
  });

  test("the server's ledger descriptions are said in the page's language; an operator's reason stays", () => {
    expect(ledgerDescription('Top-up pay_1 (chat_wallet)', zh)).toBe('充值 pay_1 微信支付');
    expect(ledgerDescription('Refund of payment pay_1', zh)).toBe('支付 pay_1 的退款');
    expect(ledgerDescription('m1 via chat: 12+30 tokens', zh)).toBe('m1（chat）：12 + 30 个 token');
    expect(ledgerDescription('Goodwill credit', zh)).toBe('Goodwill credit');
  });
});
