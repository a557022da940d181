/**
 * The language of a page or a mail for a request: the console's switch (the cpd_lang cookie), then
 * Accept-Language, then the site's default. Shared by the console shell and the accounts module
 * (an account's mails are in the language it signed up in).
 */
export type Language = 'en' | 'zh-CN';
export const LANGUAGE_COOKIE = 'cpd_lang';

/**
 * The switch (cookie) wins, then the browser's Accept-Language (its first English or Chinese
 * preference), then the site's default: Chinese on the China site, English elsewhere.
 */
export function chooseLanguage(site: 'intl' | 'cn', cookieHeader: string | null, acceptLanguage: string | null): Language {
  const chosen = /(?:^|;\s*)cpd_lang=(en|zh-CN)\b/.exec(cookieHeader ?? '')?.[1];
  if (chosen) return chosen as Language;
  const ranked = (acceptLanguage ?? '')
    .split(',')
    .map((part, i) => {
      const [tag, ...params] = part.trim().toLowerCase().split(';');
      const q = Number(
        params
          .find((p) => p.trim().startsWith('q='))
          ?.trim()
          .slice(2) ?? 1,
      );
      return { tag: tag ?? '', q: Number.isFinite(q) ? q : 0, i };
    })
    .filter((l) => l.q > 0 && (l.tag.startsWith('en') || l.tag.startsWith('zh')))
    .sort((a, b) => b.q - a.q || a.i - b.i);
  if (ranked[0]) return ranked[0].tag.startsWith('zh') ? 'zh-CN' : 'en';
  return site === 'cn' ? 'zh-CN' : 'en';
}

