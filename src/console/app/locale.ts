/**
 * Language, site and currency of this page, as the server chose them (the <html> element's lang
 * and data attributes), and the helpers that format for them. Times are shown in the browser's
 * own time zone.
 */
import { type Key, messages } from './messages';

export type Language = 'en' | 'zh-CN';

const root = document.documentElement;
export const language: Language = root.lang === 'zh-CN' ? 'zh-CN' : 'en';
export const site = root.dataset.site === 'cn' ? 'cn' : 'intl';
export const currency = root.dataset.currency ?? 'USD';

/** The message for `key` in this page's language; `{name}` placeholders are filled from `vars`. */
export function t(key: Key, vars: Record<string, string | number> = {}): string {
  return (messages[language][key] ?? key).replace(/\{(\w+)\}/g, (_, name: string) => String(vars[name] ?? ''));
}

const pluralRules = new Intl.PluralRules(language);

/** "1 session", "2 sessions": the `.one` or `.other` form of `key` for `n`, with `{n}` filled. */
export const tn = (key: 'product.sessions' | 'product.keys', n: number) =>
  t(`${key}.${pluralRules.select(n) === 'one' ? 'one' : 'other'}`, { n: formatNumber(n) });

/** The switch: remembered for a year in a plain preference cookie (not a credential), then the page reloads in that language. */
export function switchLanguage(to: Language) {
  // biome-ignore lint/suspicious/noDocumentCookie: one fixed preference value; the Cookie Store API is missing from browsers the console supports.
  document.cookie = `cpd_lang=${to}; path=/; max-age=31536000; samesite=lax`;
  location.reload();
}

export const formatTime = (iso: string | null | undefined) =>
  iso ? new Date(iso).toLocaleString(language, { dateStyle: 'medium', timeStyle: 'short' }) : '—';

export const formatDay = (date: Date) => date.toLocaleDateString(language, { month: 'short', day: 'numeric' });

export const formatNumber = (n: number) => n.toLocaleString(language);
