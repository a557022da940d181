/**
 * Playground: chat with a model through the gateway, as any client would. The gateway takes API
 * keys only (no session path), so the page uses a key the user pastes or creates here; it stays in
 * this page's memory. The answer streams (SSE, stream_options.include_usage); tokens and cost come
 * from the final usage chunk (`usage.cost`; X-Cost, sent with the first token, is only an estimate). A 402 says the wallet is empty and links to top up.
 * A key made here with an organization chosen is the organization's, so its wallet pays.
 */
import { useRef, useState } from 'preact/hooks';
import { api } from '../api';
import { currency, formatNumber, t } from '../locale';
import { formatMoney } from '../money';
import { orgQuery, useOrg } from '../org';
import { Alert, errorText, Page, Select } from '../ui';

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  /** The request's definitive cost in the site's currency, added by the gateway. */
  cost?: number;
}

/** The `data:` payloads of an SSE byte stream, one JSON object each, until [DONE]. */
async function* sseData(body: ReadableStream<Uint8Array>) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end = buffer.indexOf('\n\n');
    while (end >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split('\n'))
        if (line.startsWith('data:')) {
          const data = line.slice(5).trim();
          if (data === '[DONE]') return;
          yield JSON.parse(data);
        }
      end = buffer.indexOf('\n\n');
    }
  }
}

export function Playground() {
  const { current: org } = useOrg();
  const [key, setKey] = useState('');
  const [models, setModels] = useState<string[]>([]);
  const [answer, setAnswer] = useState('');
  const [usage, setUsage] = useState<{ tokens: Usage | null; cost: string | null } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [noMoney, setNoMoney] = useState(false);
  const [busy, setBusy] = useState(false);
  const abort = useRef<AbortController | null>(null);

  async function loadModels(withKey = key) {
    setError(null);
    const res = await fetch('/v1/models', { headers: { authorization: `Bearer ${withKey}` } });
    const body = await res.json().catch(() => null);
    if (!res.ok) return setError(typeof body?.error === 'string' ? body.error : res.statusText);
    const ids = (body?.data ?? []).map((m: { id: string }) => m.id) as string[];
    setModels(ids);
    if (ids.length === 0) setError(t('play.noModels'));
  }

  async function createKey() {
    try {
      const created = await api<{ key: string }>('POST', '/api/api-keys', { name: 'playground', ...orgQuery(org) });
      setKey(created.key);
      await loadModels(created.key);
    } catch (err) {
      setError(errorText(err));
    }
  }

  async function send(e: Event) {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const prompt = String(form.get('prompt') ?? '').trim();
    if (!prompt) return setError(t('required'));
    setError(null);
    setNoMoney(false);
    setAnswer('');
    setUsage(null);
    setBusy(true);
    abort.current = new AbortController();
    try {
      const res = await fetch('/v1/chat/completions', {
        method: 'POST',
        signal: abort.current.signal,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: String(form.get('model')),
          messages: [{ role: 'user', content: prompt }],
          stream: true,
          stream_options: { include_usage: true },
        }),
      });
      if (!res.ok || !res.body) {
        const body = await res.json().catch(() => null);
        if (res.status === 402) setNoMoney(true);
        else setError(typeof body?.error === 'string' ? body.error : res.statusText);
        return;
      }
      let text = '';
      let tokens: Usage | null = null;
      for await (const chunk of sseData(res.body)) {
        const delta = chunk.choices?.[0]?.delta?.content;
        if (typeof delta === 'string') {
          text += delta;
          setAnswer(text);
        }
        if (chunk.usage) tokens = chunk.usage;
      }
      setUsage({ tokens, cost: tokens?.cost === undefined ? null : formatMoney(tokens.cost, currency) });
    } catch (err) {
      if ((err as Error).name !== 'AbortError') setError(errorText(err));
    } finally {
      setBusy(false);
    }
  }

  return (
    <Page title={t('play.title')}>
      <p class="hint">{t('play.intro')}</p>
      <section class="card" aria-labelledby="play-key">
        <h2 id="play-key">{t('play.key')}</h2>
        <form
          class="inline"
          onSubmit={(e) => {
            e.preventDefault();
            loadModels();
          }}
        >
          <div class="field">
            <label for="play-key-input">{t('play.key')}</label>
            <input
              id="play-key-input"
              type="password"
              autocomplete="off"
              aria-describedby="play-key-hint"
              value={key}
              onInput={(e) => setKey(e.currentTarget.value)}
            />
            <small id="play-key-hint" class="hint">
              {t('play.keyHint')}
            </small>
          </div>
          <button type="submit">{t('play.loadModels')}</button>
          <button type="button" onClick={createKey}>
            {t('play.newKey')}
          </button>
        </form>
      </section>
      <Alert>{error}</Alert>
      {noMoney && (
        <p class="notice warn" role="alert">
          {t('play.noMoney')} <a href="/console/wallet">{t('dash.topUp')}</a>
        </p>
      )}
      {models.length > 0 && (
        <section class="card" aria-labelledby="play-chat">
          <h2 id="play-chat">{t('play.answer')}</h2>
          <form onSubmit={send} noValidate>
            <Select label={t('play.model')} name="model" options={models.map((m) => [m, m])} />
            <div class="field">
              <label for="play-prompt">{t('play.prompt')}</label>
              <textarea id="play-prompt" name="prompt" rows={4} />
            </div>
            <div class="actions">
              <button type="submit" disabled={busy}>
                {t('play.send')}
              </button>
              <button type="button" disabled={!busy} onClick={() => abort.current?.abort()}>
                {t('play.stop')}
              </button>
            </div>
          </form>
          <div class="output" data-testid="answer" aria-live="polite" aria-busy={busy ? 'true' : 'false'}>
            {answer}
          </div>
          {usage && (
            <p class="status" role="status" data-testid="play-cost">
              {t('play.usage', {
                prompt: formatNumber(usage.tokens?.prompt_tokens ?? 0),
                completion: formatNumber(usage.tokens?.completion_tokens ?? 0),
                cost: usage.cost ?? '—',
              })}
            </p>
          )}
        </section>
      )}
    </Page>
  );
}
