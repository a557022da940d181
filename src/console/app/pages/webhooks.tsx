/**
 * Webhooks: add an endpoint (its signing secret is shown once, with a copy button), pick its
 * events, enable or disable it, delete it, and read its delivery log with a retry button.
 */
import { useState } from 'preact/hooks';
import { api, withQuery } from '../api';
import { formatTime, t } from '../locale';
import type { Key } from '../messages';
import { Alert, ConfirmButton, CopyButton, DataTable, errorText, Field, Page, Show, Status, useCursor, useGet } from '../ui';

const EVENTS = ['payment.paid', 'payment.refunded', 'balance.low', 'key.spend_limit_reached', 'invoice.issued'] as const;

interface Webhook {
  id: string;
  url: string;
  events: string[];
  enabled: boolean;
  disabled_reason: string | null;
  created_at: string;
}

interface Delivery {
  id: string;
  event_id: string;
  event_type: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  next_attempt_at: string | null;
  last_status_code: number | null;
  last_error: string | null;
  last_duration_ms: number | null;
  created_at: string;
}

const eventName = (type: string) => t(`webhooks.event.${type}` as Key);

export function Webhooks() {
  const hooks = useGet<{ webhooks: Webhook[] }>('/api/webhooks');
  const [created, setCreated] = useState<(Webhook & { secret: string }) | null>(null);
  const [errors, setErrors] = useState<{ url?: string; events?: string; form?: string }>({});
  const [open, setOpen] = useState<Webhook | null>(null);
  const [failure, setFailure] = useState<string | null>(null);

  async function create(e: Event) {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    const url = String(data.get('url') ?? '').trim();
    const events = data.getAll('events').map(String);
    const found = { url: url ? undefined : t('required'), events: events.length ? undefined : t('webhooks.pickEvent') };
    if (found.url || found.events) return setErrors(found);
    setErrors({});
    try {
      setCreated(await api<Webhook & { secret: string }>('POST', '/api/webhooks', { url, events }));
      form.reset();
      hooks.reload();
    } catch (err) {
      const message = errorText(err);
      setErrors(message.startsWith('url') ? { url: message } : message.startsWith('events') ? { events: message } : { form: message });
    }
  }

  async function act(run: () => Promise<unknown>) {
    setFailure(null);
    try {
      await run();
    } catch (err) {
      setFailure(errorText(err));
    }
    hooks.reload();
  }

  const setEnabled = (hook: Webhook, enabled: boolean) =>
    act(() => api('PATCH', `/api/webhooks/${encodeURIComponent(hook.id)}`, { enabled }));
  function remove(hook: Webhook) {
    if (open?.id === hook.id) setOpen(null);
    void act(() => api('DELETE', `/api/webhooks/${encodeURIComponent(hook.id)}`));
  }

  return (
    <Page title={t('webhooks.title')}>
      <p class="hint">{t('webhooks.intro')}</p>
      <form onSubmit={create} noValidate aria-label={t('webhooks.create')}>
        <Field label={t('webhooks.url')} name="url" maxLength={2048} error={errors.url} autocomplete="off" />
        <fieldset aria-describedby={errors.events ? 'webhook-events-error' : undefined}>
          <legend>{t('webhooks.events')}</legend>
          {EVENTS.map((type) => (
            <label key={type} class="check">
              <input type="checkbox" name="events" value={type} /> {eventName(type)} <code>{type}</code>
            </label>
          ))}
          {errors.events && (
            <small id="webhook-events-error" class="error" role="alert">
              {errors.events}
            </small>
          )}
        </fieldset>
        <Alert>{errors.form}</Alert>
        <button type="submit">{t('webhooks.create')}</button>
      </form>
      {created && (
        <div class="notice" role="status">
          <p>{t('webhooks.once')}</p>
          <code data-testid="new-webhook-secret">{created.secret}</code> <CopyButton text={created.secret} label={t('webhooks.copy')} />
        </div>
      )}
      <Alert>{failure}</Alert>
      <Show loaded={hooks}>
        {({ webhooks }) => (
          <DataTable
            rows={webhooks}
            empty={t('webhooks.none')}
            head={
              <>
                <th>{t('webhooks.url')}</th>
                <th>{t('webhooks.events')}</th>
                <th>{t('status')}</th>
                <th>{t('created')}</th>
                <th>
                  <span class="visually-hidden">{t('actions')}</span>
                </th>
              </>
            }
            row={(hook) => (
              <tr key={hook.id}>
                <td>
                  <code>{hook.url}</code>
                </td>
                <td>{hook.events.map(eventName).join(', ')}</td>
                <td>
                  {hook.enabled
                    ? t('webhooks.enabled')
                    : hook.disabled_reason
                      ? t('webhooks.disabledBecause', { reason: hook.disabled_reason })
                      : t('webhooks.disabled')}
                </td>
                <td>{formatTime(hook.created_at)}</td>
                <td>
                  <button type="button" onClick={() => setOpen(hook)} aria-label={t('webhooks.deliveriesNamed', { url: hook.url })}>
                    {t('webhooks.showDeliveries')}
                  </button>{' '}
                  <button
                    type="button"
                    onClick={() => setEnabled(hook, !hook.enabled)}
                    aria-label={t(hook.enabled ? 'webhooks.disableNamed' : 'webhooks.enableNamed', { url: hook.url })}
                  >
                    {t(hook.enabled ? 'webhooks.disable' : 'webhooks.enable')}
                  </button>{' '}
                  <ConfirmButton
                    label={t('webhooks.delete')}
                    aria-label={t('webhooks.deleteNamed', { url: hook.url })}
                    question={t('webhooks.confirmDelete', { url: hook.url })}
                    confirmLabel={t('webhooks.delete')}
                    onConfirm={() => remove(hook)}
                  />
                </td>
              </tr>
            )}
          />
        )}
      </Show>
      {open && <Deliveries key={open.id} hook={open} onClose={() => setOpen(null)} />}
    </Page>
  );
}

function lastResult(d: Delivery): string {
  if (d.attempts === 0) return '—';
  const what = d.last_error ?? String(d.last_status_code);
  return d.last_duration_ms === null ? what : `${what} · ${d.last_duration_ms} ms`;
}

function Deliveries({ hook, onClose }: { hook: Webhook; onClose: () => void }) {
  const { cursor, Pager } = useCursor();
  const deliveries = useGet<{ deliveries: Delivery[]; next_cursor: string | null }>(
    withQuery(`/api/webhooks/${encodeURIComponent(hook.id)}/deliveries`, { cursor }),
  );
  const [note, setNote] = useState<string | null>(null);
  const [failure, setFailure] = useState<string | null>(null);

  async function retry(d: Delivery) {
    setNote(null);
    setFailure(null);
    try {
      await api('POST', `/api/webhooks/${encodeURIComponent(hook.id)}/deliveries/${encodeURIComponent(d.id)}/retry`);
      setNote(t('webhooks.retried'));
    } catch (err) {
      setFailure(errorText(err));
    }
    deliveries.reload();
  }

  return (
    <section aria-label={t('webhooks.deliveriesNamed', { url: hook.url })}>
      <h2>{t('webhooks.deliveriesNamed', { url: hook.url })}</h2>
      {note && <Status>{note}</Status>}
      <Alert>{failure}</Alert>
      <Show loaded={deliveries}>
        {(page) => (
          <>
            <DataTable
              rows={page.deliveries}
              empty={t('webhooks.noDeliveries')}
              data-testid="webhook-deliveries"
              head={
                <>
                  <th>{t('webhooks.event')}</th>
                  <th>{t('status')}</th>
                  <th>{t('webhooks.attempts')}</th>
                  <th>{t('webhooks.lastResult')}</th>
                  <th>{t('webhooks.nextAttempt')}</th>
                  <th>{t('created')}</th>
                  <th>
                    <span class="visually-hidden">{t('actions')}</span>
                  </th>
                </>
              }
              row={(d) => (
                <tr key={d.id}>
                  <td>
                    {eventName(d.event_type)} <code>{d.event_id}</code>
                  </td>
                  <td>{t(`webhooks.delivery.${d.status}` as Key)}</td>
                  <td>{d.attempts}</td>
                  <td>{lastResult(d)}</td>
                  <td>{formatTime(d.next_attempt_at)}</td>
                  <td>{formatTime(d.created_at)}</td>
                  <td>
                    <button type="button" onClick={() => retry(d)} aria-label={t('webhooks.retryNamed', { event: d.event_id })}>
                      {t('webhooks.retry')}
                    </button>
                  </td>
                </tr>
              )}
            />
            <Pager next={page.next_cursor} />
          </>
        )}
      </Show>
      <button type="button" onClick={onClose}>
        {t('webhooks.close')}
      </button>
    </section>
  );
}
