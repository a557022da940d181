/**
 * Captures: the list of captured requests (GET /api/captures, or everyone's at /api/admin/captures
 * for the admin pages) with filters and cursor pages; one capture's request and answer; the Replay
 * form (POST /v1/router/replay, optionally against another model); and, for a replay, the
 * side-by-side comparison with its original (text, tokens, cost, latency).
 */
import { useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { get, withQuery } from '../api';
import { formatNumber, formatTime, t } from '../locale';
import { formatMoney } from '../money';
import { Alert, DataTable, Field, Page, Show, Status, errorText, useCursor, useGet } from '../ui';
import { dateInput, rangeQuery } from './usage';

interface Capture {
  id: string;
  created_at: string;
  expires_at: string;
  user_id: string;
  key_id: string | null;
  endpoint: string;
  entrypoint: string;
  model: string;
  status: number;
  latency_ms: number;
  backend: string | null;
  streamed: boolean;
  prompt_tokens: number;
  completion_tokens: number;
  cost: number;
  currency: string;
  request_truncated: boolean;
  response_truncated: boolean;
  replay_of: string | null;
}
interface CaptureDetail extends Capture {
  request: unknown;
  response: unknown;
}

/** Where the pages read: the caller's own, or everyone's (admin). */
const base = (admin: boolean) => (admin ? '/api/admin/captures' : '/api/captures');
const pageOf = (admin: boolean) => (admin ? '/console/admin/captures' : '/console/captures');

export function Captures({ admin = false }: { admin?: boolean }) {
  const today = new Date();
  const [filters, setFilters] = useState({ from: dateInput(new Date(today.getFullYear(), today.getMonth(), today.getDate() - 6)), to: dateInput(today), model: '', key_id: '' });
  const { cursor, reset, Pager } = useCursor();
  const page = useGet<{ captures: Capture[]; next_cursor: string | null }>(
    withQuery(base(admin), { ...rangeQuery(filters.from, filters.to), model: filters.model, key_id: filters.key_id, limit: 50, cursor }),
  );

  function apply(e: Event) {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    reset();
    setFilters({ from: String(form.get('from')), to: String(form.get('to')), model: String(form.get('model') ?? '').trim(), key_id: String(form.get('key_id') ?? '').trim() });
  }

  return (
    <Page title={t(admin ? 'nav.admin.captures' : 'nav.captures')}>
      <p>{t('captures.intro')}</p>
      <form class="inline" onSubmit={apply}>
        <Field label={t('from')} name="from" type="date" value={filters.from} required />
        <Field label={t('to')} name="to" type="date" value={filters.to} required />
        <Field label={t('model')} name="model" value={filters.model} />
        <Field label={t('usage.key')} name="key_id" value={filters.key_id} />
        <button type="submit">{t('apply')}</button>
      </form>
      <Show loaded={page}>
        {({ captures, next_cursor }) => (
          <>
            <DataTable
              rows={captures}
              empty={t('none')}
              data-testid="captures"
              head={
                <>
                  <th>{t('time')}</th>
                  {admin && <th>{t('captures.user')}</th>}
                  <th>{t('captures.endpoint')}</th>
                  <th>{t('model')}</th>
                  <th>{t('usage.entrypoint')}</th>
                  <th class="num">{t('usage.tokens')}</th>
                  <th class="num">{t('usage.cost')}</th>
                  <th>{t('status')}</th>
                  <th class="num">{t('usage.latency')}</th>
                  <th>
                    <span class="visually-hidden">{t('actions')}</span>
                  </th>
                </>
              }
              row={(c) => (
                <tr key={c.id}>
                  <td>{formatTime(c.created_at)}</td>
                  {admin && <td>{c.user_id}</td>}
                  <td>{c.endpoint}</td>
                  <td>{c.model}</td>
                  <td>{c.replay_of ? `${c.entrypoint} · ${t('captures.replayOf')} ${c.replay_of}` : c.entrypoint}</td>
                  <td class="num">
                    {formatNumber(c.prompt_tokens)} + {formatNumber(c.completion_tokens)}
                  </td>
                  <td class="num">{formatMoney(c.cost, c.currency)}</td>
                  <td>
                    {c.status}
                    {c.streamed ? ` · ${t('usage.streamed')}` : ''}
                  </td>
                  <td class="num">{formatNumber(c.latency_ms)} ms</td>
                  <td>
                    <a href={`${pageOf(admin)}/${encodeURIComponent(c.id)}`}>{t('captures.open')}</a>
                  </td>
                </tr>
              )}
            />
            <Pager next={next_cursor} />
          </>
        )}
      </Show>
    </Page>
  );
}

export const AdminCaptures = () => <Captures admin />;

/** The answer's text, whatever the endpoint's shape: chat JSON, a stream's assembled text, a Responses object, embeddings. */
function answerText(response: unknown): string {
  const r = (response ?? {}) as Record<string, any>;
  if (typeof r === 'string') return r;
  if (typeof r.text === 'string') return r.text;
  if (typeof r.error === 'string') return r.error;
  if (Array.isArray(r.choices)) return String(r.choices[0]?.message?.content ?? JSON.stringify(r.choices[0]?.message?.tool_calls ?? ''));
  if (typeof r.output_text === 'string') return r.output_text;
  if (Array.isArray(r.output))
    return r.output.flatMap((o: any) => (Array.isArray(o?.content) ? o.content.map((c: any) => c?.text ?? '') : [])).join('');
  if (Array.isArray(r.data)) return `${r.data.length} × embedding`;
  return '';
}

const Json = ({ value }: { value: unknown }) => <pre class="json">{typeof value === 'string' ? value : JSON.stringify(value, null, 2)}</pre>;

export function CaptureView({ id, admin = false }: { id: string; admin?: boolean }) {
  const capture = useGet<CaptureDetail>(`${base(admin)}/${encodeURIComponent(id)}`);
  const original = useGet<CaptureDetail>(capture.data?.replay_of ? `${base(admin)}/${encodeURIComponent(capture.data.replay_of)}` : null);
  return (
    <Page title={`${t('nav.captures')} · ${id}`}>
      <Show loaded={capture}>
        {(c) => (
          <>
            {c.replay_of && original.data && <Compare original={original.data} replay={c} />}
            {c.replay_of && original.error && <Alert>{original.error}</Alert>}
            <dl class="facts">
              <dt>{t('time')}</dt>
              <dd>{formatTime(c.created_at)}</dd>
              <dt>{t('captures.expires')}</dt>
              <dd>{formatTime(c.expires_at)}</dd>
              <dt>{t('captures.endpoint')}</dt>
              <dd>{c.endpoint}</dd>
              <dt>{t('model')}</dt>
              <dd>
                {c.model} ({c.entrypoint})
              </dd>
              <dt>{t('status')}</dt>
              <dd>{c.status}</dd>
              <dt>{t('captures.backend')}</dt>
              <dd>{c.backend ?? '—'}</dd>
              {c.replay_of && (
                <>
                  <dt>{t('captures.replayOf')}</dt>
                  <dd>
                    <a href={`${pageOf(admin)}/${encodeURIComponent(c.replay_of)}`}>{c.replay_of}</a>
                  </dd>
                </>
              )}
            </dl>
            <ReplayForm capture={c} admin={admin} />
            <h2>{t('captures.request')}</h2>
            {c.request_truncated && <p>{t('captures.truncated')}</p>}
            <Json value={c.request} />
            <h2>{t('captures.response')}</h2>
            {c.response_truncated && <p>{t('captures.truncated')}</p>}
            <Json value={c.response} />
          </>
        )}
      </Show>
    </Page>
  );
}

export const AdminCaptureView = ({ id }: { id: string }) => <CaptureView id={id} admin />;

function Compare({ original, replay }: { original: CaptureDetail; replay: CaptureDetail }) {
  const row = (label: string, show: (c: CaptureDetail) => string) => (
    <tr>
      <th scope="row">{label}</th>
      <td>{show(original)}</td>
      <td>{show(replay)}</td>
    </tr>
  );
  return (
    <>
      <h2>{t('captures.compare')}</h2>
      <table data-testid="compare">
        <thead>
          <tr>
            <th>
              <span class="visually-hidden">{t('actions')}</span>
            </th>
            <th>{t('captures.original')}</th>
            <th>{t('captures.replayed')}</th>
          </tr>
        </thead>
        <tbody>
          {row(t('model'), (c) => c.model)}
          {row(t('captures.text'), (c) => answerText(c.response))}
          {row(t('usage.tokens'), (c) => `${formatNumber(c.prompt_tokens)} + ${formatNumber(c.completion_tokens)}`)}
          {row(t('usage.cost'), (c) => formatMoney(c.cost, c.currency))}
          {row(t('usage.latency'), (c) => `${formatNumber(c.latency_ms)} ms`)}
          {row(t('status'), (c) => String(c.status))}
        </tbody>
      </table>
    </>
  );
}

/**
 * Replay needs an API key of the capture's owner, or an admin session (the cookie); the key
 * typed here goes in this one request's Authorization header and is kept nowhere. The answer may
 * be a stream: it is read to its end, then the replay's own capture (X-Capture-Id) is opened once
 * it has been stored.
 */
function ReplayForm({ capture, admin }: { capture: Capture; admin: boolean }) {
  const { route } = useLocation();
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);

  async function replay(e: Event) {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const model = String(form.get('model') ?? '').trim();
    const key = String(form.get('key') ?? '').trim();
    setError(null);
    setBusy(t('captures.replaying'));
    try {
      const res = await fetch('/v1/router/replay', {
        method: 'POST',
        credentials: key ? 'omit' : 'same-origin',
        headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
        body: JSON.stringify({ capture_id: capture.id, ...(model ? { model } : {}) }),
      });
      const text = await res.text();
      if (!res.ok) throw new Error(JSON.parse(text)?.error ?? res.statusText);
      const id = res.headers.get('x-capture-id');
      if (!id) throw new Error(res.statusText);
      setBusy(t('captures.waiting'));
      // The capture is written just after the answer: look for it in the newest few a number of times
      // (the list, not the capture itself, whose 404 meanwhile would read as an error).
      for (let i = 0; i < 20; i++) {
        const newest = await get<{ captures: Capture[] }>(withQuery(base(admin), { limit: 20 }));
        if (newest.captures.some((c) => c.id === id)) return route(`${pageOf(admin)}/${encodeURIComponent(id)}`);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      throw new Error(t('captures.notFound'));
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(null);
    }
  }

  return (
    <form class="inline" aria-label={t('captures.replay')} onSubmit={replay}>
      <Field label={t('captures.replayModel')} name="model" />
      <Field label={t('captures.replayKey')} name="key" type="password" autocomplete="off" hint={t('captures.replayKeyHint')} />
      <button type="submit" disabled={busy !== null || capture.request_truncated}>
        {t('captures.replay')}
      </button>
      {busy && <Status>{busy}</Status>}
      <Alert>{error}</Alert>
    </form>
  );
}
