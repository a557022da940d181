/**
 * The mails an account receives, in English and Simplified Chinese: a localized subject, a plain
 * text body and the same as simple HTML (escaped values, one link as a button-like anchor).
 */
import { escapeHtml } from '../../platform/http/html';
import type { Language } from '../../platform/http/language';

export type MailContent =
  | { kind: 'verify_email'; link: string }
  | { kind: 'reset_password'; link: string }
  | { kind: 'password_changed'; link: string }
  | { kind: 'registration_attempt'; link: string }
  /** `document`: a receipt to open (international site) or an invoice to request (China site). */
  | { kind: 'payment_received'; amount: string; paymentId: string; link: string; document: 'receipt' | 'invoice' }
  | { kind: 'refund'; amount: string; paymentId: string }
  | { kind: 'low_balance'; balance: string; threshold: string; link: string }
  /** `origin`: the endpoint's scheme and host only (its path may hold the receiver's own token). */
  | { kind: 'webhook_disabled'; origin: string; link: string }
  /** An invitation to join an organization (`inviter`: the inviting member's email). */
  | { kind: 'org_invite'; org: string; inviter: string; role: string; link: string };

interface Text {
  subject: string;
  /** Paragraphs; `{name}` placeholders are filled from the content. */
  lines: string[];
  /** The label of the link, when there is one (by document for a payment). */
  action?: string | Record<'receipt' | 'invoice', string>;
}

type Templates = Record<MailContent['kind'], Text>;

const en: Templates = {
  verify_email: {
    subject: 'Confirm your email address',
    lines: ['Please confirm that this address belongs to your {site} account.', 'The link works once and for 24 hours. If you did not sign up, ignore this mail.'],
    action: 'Confirm email',
  },
  reset_password: {
    subject: 'Reset your password',
    lines: ['Someone (hopefully you) asked to reset the password of your {site} account.', 'The link works once and for 30 minutes. If it was not you, ignore this mail: your password stays as it is.'],
    action: 'Choose a new password',
  },
  password_changed: {
    subject: 'Your password was changed',
    lines: ['The password of your {site} account was just changed.', 'If that was not you, reset it now with the link below and check your API keys.'],
    action: 'Reset the password',
  },
  registration_attempt: {
    subject: 'Someone tried to sign up with your email',
    lines: [
      'Someone tried to create a {site} account with this address, which already has one.',
      'If that was you, log in instead; if you forgot the password, reset it. Otherwise ignore this mail.',
    ],
    action: 'Log in',
  },
  payment_received: {
    subject: 'Payment received: {amount}',
    lines: ['We received your payment {paymentId} of {amount}; it is in your {site} wallet.'],
    action: { receipt: 'View the receipt', invoice: 'Request an invoice' },
  },
  refund: {
    subject: 'Refund: {amount}',
    lines: ['{amount} of your payment {paymentId} was refunded; your wallet was reduced by that amount.', 'The money reaches your account in the time your bank or payment service takes.'],
  },
  low_balance: {
    subject: 'Your balance is low: {balance}',
    lines: ['The balance of your {site} wallet is {balance}, below the {threshold} you chose to be told about.', 'Top up to keep your API keys working.'],
    action: 'Top up',
  },
  org_invite: {
    subject: 'You are invited to join {org} on {site}',
    lines: ['{inviter} invites you to join the organization {org} on {site} as {role}.', 'The link works once and for 7 days; sign in (or sign up) to accept. If you did not expect it, ignore this mail.'],
    action: 'Accept the invitation',
  },
  webhook_disabled: {
    subject: 'Webhook endpoint disabled: {origin}',
    lines: ['Deliveries to your webhook endpoint at {origin} failed for 3 days, so {site} disabled it.', 'Fix the receiver, then enable the endpoint again; failed deliveries can be retried from its delivery log.'],
    action: 'Open webhooks',
  },
};

const zh: Templates = {
  verify_email: {
    subject: '请确认您的邮箱地址',
    lines: ['请确认此邮箱属于您的 {site} 账户。', '链接只能使用一次，24 小时内有效。如果您没有注册，请忽略此邮件。'],
    action: '确认邮箱',
  },
  reset_password: {
    subject: '重置您的密码',
    lines: ['有人（希望是您本人）请求重置您 {site} 账户的密码。', '链接只能使用一次，30 分钟内有效。如果不是您本人操作，请忽略此邮件，您的密码不会改变。'],
    action: '设置新密码',
  },
  password_changed: {
    subject: '您的密码已更改',
    lines: ['您 {site} 账户的密码刚刚被更改。', '如果不是您本人操作，请立即通过下面的链接重置密码，并检查您的 API 密钥。'],
    action: '重置密码',
  },
  registration_attempt: {
    subject: '有人尝试用您的邮箱注册',
    lines: ['有人尝试用此邮箱创建 {site} 账户，但该邮箱已有账户。', '如果是您本人，请直接登录；忘记密码可以重置。否则请忽略此邮件。'],
    action: '登录',
  },
  payment_received: {
    subject: '已收到付款：{amount}',
    lines: ['我们已收到您的付款 {paymentId}，金额 {amount}，已存入您的 {site} 钱包。'],
    action: { receipt: '查看收据', invoice: '申请发票' },
  },
  refund: {
    subject: '退款：{amount}',
    lines: ['您的付款 {paymentId} 已退款 {amount}，钱包余额相应减少。', '款项到账时间取决于您的银行或支付服务。'],
  },
  low_balance: {
    subject: '余额不足：{balance}',
    lines: ['您 {site} 钱包的余额为 {balance}，低于您设置的提醒金额 {threshold}。', '请及时充值，以免 API 密钥停止工作。'],
    action: '充值',
  },
  org_invite: {
    subject: '邀请您加入 {site} 上的组织 {org}',
    lines: ['{inviter} 邀请您以 {role} 身份加入 {site} 上的组织 {org}。', '链接 7 天内有效，仅可使用一次；请登录（或注册）后接受。如非预期，请忽略此邮件。'],
    action: '接受邀请',
  },
  webhook_disabled: {
    subject: 'Webhook 端点已停用：{origin}',
    lines: ['向您位于 {origin} 的 webhook 端点投递已连续失败 3 天，{site} 已将其停用。', '修复接收端后请重新启用该端点；失败的投递可在投递记录中重试。'],
    action: '打开 Webhooks',
  },
};

const SIGNATURE = '— {site}';

export interface RenderedMail {
  subject: string;
  text: string;
  html: string;
}

/** The mail in `locale`; `site` is the site's name as GET /api/site shows it. */
export function renderMail(content: MailContent, locale: Language, site: string): RenderedMail {
  const template = (locale === 'zh-CN' ? zh : en)[content.kind];
  const values: Record<string, string> = { site };
  for (const [k, v] of Object.entries(content)) if (typeof v === 'string') values[k] = v;
  const fill = (s: string) => s.replace(/\{(\w+)\}/g, (_, name: string) => values[name] ?? '');
  const lines = template.lines.map(fill);
  const link = 'link' in content ? content.link : null;
  const signature = fill(SIGNATURE);
  const label = typeof template.action === 'object' ? template.action[content.kind === 'payment_received' ? content.document : 'receipt'] : template.action;
  const action = label ? fill(label) : null;
  const text = [...lines, ...(link ? [`${action ? `${action}: ` : ''}${link}`] : []), signature].join('\n\n');
  const html = `<!doctype html>
<html lang="${locale}"><head><meta charset="utf-8"><title>${escapeHtml(fill(template.subject))}</title></head>
<body style="font-family:sans-serif;line-height:1.5;max-width:36em">
${lines.map((l) => `<p>${escapeHtml(l)}</p>`).join('\n')}
${link ? `<p><a href="${escapeHtml(link)}" style="display:inline-block;padding:.5em 1em;background:#2458d6;color:#fff;text-decoration:none;border-radius:4px">${escapeHtml(action ?? link)}</a></p>\n<p style="font-size:.85em;color:#555">${escapeHtml(link)}</p>` : ''}
<p>${escapeHtml(signature)}</p>
</body></html>
`;
  return { subject: fill(template.subject), text: `${text}\n`, html };
}
