/**
 * Onboarding for an account that has sent no request yet: create a key (in a dialog, shown once),
 * copy a curl / Python / JavaScript snippet aimed at this site's public URL, then wait for the
 * first request to show up in the usage log (polled every two seconds).
 */
import { useEffect, useState } from 'preact/hooks';
import { api, get } from '../api';
import { t } from '../locale';
import { formatMoney } from '../money';
import { CopyButton, Dialog, errorText, Field } from '../ui';

interface UsageRow {
  model: string;
  cost: number;
  currency: string;
}

type Language = 'curl' | 'python' | 'javascript';

export function snippet(language: Language, baseUrl: string, key: string, model: string): string {
  const v1 = `${baseUrl.replace(/\/$/, '')}/v1`;
  if (language === 'curl')
    return `curl ${v1}/chat/completions \\
  -H "Authorization: Bearer ${key}" \\
  -H "Content-Type: application/json" \\
  -d '{"model": "${model}", "messages": [{"role": "user", "content": "Hello"}]}'`;
  if (language === 'python')
    return `from openai import OpenAI

client = OpenAI(base_url="${v1}", api_key="${key}")
reply = client.chat.completions.create(
    model="${model}",
    messages=[{"role": "user", "content": "Hello"}],
)
print(reply.choices[0].message.content)`;
  return `import OpenAI from 'openai';

const client = new OpenAI({ baseURL: '${v1}', apiKey: '${key}' });
const reply = await client.chat.completions.create({
  model: '${model}',
  messages: [{ role: 'user', content: 'Hello' }],
});
console.log(reply.choices[0].message.content);`;
}

export function Onboarding({ baseUrl, model, onFirstRequest }: { baseUrl: string; model: string; onFirstRequest: () => void }) {
  const [creating, setCreating] = useState(false);
  const [key, setKey] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [language, setLanguage] = useState<Language>('curl');
  const [seen, setSeen] = useState<UsageRow | null>(null);

  useEffect(() => {
    if (seen) return;
    let live = true;
    const poll = async () => {
      const { usage } = await get<{ usage: UsageRow[] }>('/api/usage?limit=1').catch(() => ({ usage: [] }));
      if (!live) return;
      if (usage[0]) {
        setSeen(usage[0]);
        onFirstRequest();
      } else timer = setTimeout(poll, 2000);
    };
    let timer = setTimeout(poll, 2000);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [seen]);

  async function create(e: Event) {
    e.preventDefault();
    const name = String(new FormData(e.currentTarget as HTMLFormElement).get('name') ?? '').trim();
    if (!name) return setError(t('required'));
    try {
      setKey((await api<{ key: string }>('POST', '/api/api-keys', { name })).key);
      setError(null);
    } catch (err) {
      setError(errorText(err));
    }
  }

  const code = snippet(language, baseUrl, key ?? 'YOUR_API_KEY', model);
  return (
    <section class="card" aria-labelledby="onboarding" data-testid="onboarding">
      <h2 id="onboarding">{t('onboard.title')}</h2>
      <p class="hint">{t('onboard.intro')}</p>
      <h3>{t('onboard.step1')}</h3>
      <button type="button" class="primary" onClick={() => setCreating(true)}>
        {t('onboard.createKey')}
      </button>
      <Dialog open={creating} title={t('onboard.createKey')} onClose={() => setCreating(false)}>
        {key ? (
          <div class="notice" role="status">
            <p>{t('onboard.haveKey')}</p>
            <code data-testid="onboarding-key">{key}</code> <CopyButton text={key} label={t('keys.copy')} />
          </div>
        ) : (
          <form onSubmit={create} noValidate>
            <Field label={t('onboard.keyName')} name="name" defaultValue={t('onboard.keyDefault')} maxLength={100} error={error} />
            <button type="submit">{t('keys.create')}</button>
          </form>
        )}
      </Dialog>
      <h3>{t('onboard.step2')}</h3>
      {!key && <p class="hint">{t('onboard.keyHidden')}</p>}
      <fieldset class="tabs">
        <legend class="visually-hidden">{t('onboard.step2')}</legend>
        {(['curl', 'python', 'javascript'] as const).map((l) => (
          <button type="button" aria-pressed={language === l ? 'true' : 'false'} onClick={() => setLanguage(l)}>
            {l === 'curl' ? 'curl' : l === 'python' ? 'Python' : 'JavaScript'}
          </button>
        ))}
      </fieldset>
      <pre class="code" data-testid="snippet">
        {code}
      </pre>
      <CopyButton text={code} label={t('onboard.copy')} />
      <h3>{t('onboard.step3')}</h3>
      {seen ? (
        <p class="status" role="status" data-testid="first-request">
          {t('onboard.seen', { model: seen.model, cost: formatMoney(seen.cost, seen.currency) })}
        </p>
      ) : (
        <p role="status">
          <progress aria-label={t('onboard.waiting')} /> {t('onboard.waiting')}
        </p>
      )}
    </section>
  );
}
