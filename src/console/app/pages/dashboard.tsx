/**
 * The console's first page: balance (with a low-balance warning), spend this month by day, request
 * count, top models, recent errors, the gateway's base URL, and onboarding for an account that has
 * sent no request yet. Everything comes from the APIs the other pages use; the wallet is /console/wallet.
 * With an organization chosen its owners and admins see the organization's figures; a member, whose
 * organization's billing is not theirs to see, sees its own spend limit there instead.
 */
import { useState } from 'preact/hooks';
import { withQuery } from '../api';
import { DailyCostChart } from '../cost-chart';
import { formatNumber, formatTime, t } from '../locale';
import { formatMicros, formatMoney, toMicros } from '../money';
import { managesOrg, orgQuery, useOrg } from '../org';
import { CopyButton, DataTable, Page, Show, useGet } from '../ui';
import { Onboarding } from './onboarding';
import { MemberHome } from './org-home';

interface Summary {
  balance: number;
  currency: string;
  month_usage: number;
}
interface UsageRow {
  id: string;
  created_at: string;
  model: string;
  status: string | number;
}
interface CostRow {
  model?: string;
  cost_usd: number;
  tokens: number;
}

const failed = (status: string | number) => !/^(2\d\d|ok)$/.test(String(status));

export function Dashboard() {
  const { current: org } = useOrg();
  if (org && !managesOrg(org)) return <MemberHome org={org} />;
  return <Figures key={org?.id ?? ''} />;
}

function Figures() {
  const { current: org } = useOrg();
  const scope = orgQuery(org);
  const now = new Date();
  const monthStart = new Date(now.getFullYear(), now.getMonth(), 1);
  const summary = useGet<Summary>(withQuery('/api/billing/summary', scope));
  // The low-balance threshold is the caller's own setting, for its own wallet.
  const notifications = useGet<{ low_balance: number | null }>(org ? null : '/api/auth/notifications');
  const site = useGet<{ public_url: string }>('/api/site');
  const pricing = useGet<{ models: Array<{ slug: string }> }>('/api/pricing');
  // Fixed for the page's life: a path that changed on every render would fetch again on every render.
  const [since] = useState(() => new Date(now.getTime() - 30 * 86_400_000).toISOString());
  const usage = useGet<{ usage: UsageRow[]; next_cursor: string | null }>(withQuery('/api/usage', { from: since, limit: 200, ...scope }));
  const top = useGet<{ items: CostRow[] }>(withQuery('/v1/router/cost', { from: monthStart.toISOString(), group_by: 'model', ...scope }));
  // Onboarding stays on the page for the visit in which the first request arrives, so its "seen" step shows.
  const [onboarding, setOnboarding] = useState<boolean | null>(null);
  // An organization's first key is made on the keys page; onboarding walks through the caller's own.
  if (onboarding === null && usage.data) setOnboarding(!org && usage.data.usage.length === 0);

  const baseUrl = site.data?.public_url ?? location.origin;
  const days: Date[] = [];
  for (let d = monthStart; d <= now; d = new Date(d.getFullYear(), d.getMonth(), d.getDate() + 1)) days.push(d);

  return (
    <Page title={org ? org.name : t('dash.title')}>
      <Show loaded={summary}>
        {(s) => {
          const threshold = notifications.data?.low_balance ?? 1;
          return (
            <>
              {s.balance <= threshold && (
                <p class="notice warn" role="status" data-testid="low-balance">
                  {org
                    ? t('orgs.lowBalance', { org: org.name, balance: formatMoney(s.balance, s.currency) })
                    : t('dash.lowBalance', { balance: formatMoney(s.balance, s.currency) })}{' '}
                  <a href="/console/wallet">{t('dash.topUp')}</a>
                </p>
              )}
              <dl class="stats">
                <div>
                  <dt>{t('wallet.balance')}</dt>
                  <dd data-testid="balance">{formatMoney(s.balance, s.currency)}</dd>
                </div>
                <div>
                  <dt>{t('wallet.monthUsage')}</dt>
                  <dd>{formatMoney(s.month_usage, s.currency)}</dd>
                </div>
                <div>
                  <dt>{t('dash.requests')}</dt>
                  <dd data-testid="request-count">
                    {usage.data ? `${formatNumber(usage.data.usage.length)}${usage.data.next_cursor ? '+' : ''}` : '…'}
                  </dd>
                </div>
              </dl>
            </>
          );
        }}
      </Show>
      {onboarding && (
        <Onboarding
          baseUrl={baseUrl}
          model={pricing.data?.models[0]?.slug ?? 'MODEL'}
          onFirstRequest={() => {
            usage.reload();
            top.reload();
            summary.reload();
          }}
        />
      )}
      <section class="card" aria-labelledby="gateway">
        <h2 id="gateway">{t('dash.gateway')}</h2>
        <dl class="facts">
          <dt>{t('dash.baseUrl')}</dt>
          <dd>
            <code data-testid="base-url">{baseUrl}/v1</code> <CopyButton text={`${baseUrl}/v1`} label={t('dash.copyUrl')} />
          </dd>
        </dl>
        <p class="actions">
          <a href="/api/docs">{t('dash.apiDocs')}</a>
          <a href="/pricing">{t('dash.pricing')}</a>
        </p>
      </section>
      <section class="card" aria-labelledby="spend">
        <h2 id="spend">{t('dash.spendByDay')}</h2>
        <DailyCostChart days={days} groupBy="model" orgId={org?.id} />
      </section>
      <div class="grid">
        <section class="card" aria-labelledby="top-models">
          <h2 id="top-models">{t('dash.topModels')}</h2>
          <Show loaded={top}>{({ items }) => <TopModels items={items.slice(0, 5)} />}</Show>
        </section>
        <section class="card" aria-labelledby="errors">
          <h2 id="errors">{t('dash.recentErrors')}</h2>
          <Show loaded={usage}>
            {({ usage: rows }) => (
              <DataTable
                rows={rows.filter((r) => failed(r.status)).slice(0, 5)}
                empty={t('dash.noErrors')}
                data-testid="recent-errors"
                head={
                  <>
                    <th>{t('time')}</th>
                    <th>{t('model')}</th>
                    <th>{t('status')}</th>
                  </>
                }
                row={(r) => (
                  <tr key={r.id}>
                    <td class="time">{formatTime(r.created_at)}</td>
                    <td>{r.model}</td>
                    <td>{r.status}</td>
                  </tr>
                )}
              />
            )}
          </Show>
        </section>
      </div>
    </Page>
  );
}

function TopModels({ items }: { items: CostRow[] }) {
  const total = items.reduce((sum, r) => sum + toMicros(r.cost_usd), 0n);
  return (
    <DataTable
      rows={items}
      empty={t('dash.noModels')}
      data-testid="top-models"
      head={
        <>
          <th>{t('model')}</th>
          <th class="num">{t('usage.tokens')}</th>
          <th class="num">{t('usage.cost')}</th>
          <th class="num">{t('dash.share')}</th>
        </>
      }
      row={(r) => {
        const share = total > 0n ? Number((toMicros(r.cost_usd) * 100n) / total) : 0;
        return (
          <tr key={r.model}>
            <td>{r.model}</td>
            <td class="num">{formatNumber(r.tokens)}</td>
            <td class="num">{formatMicros(toMicros(r.cost_usd), 'USD')}</td>
            <td class="num">{share}%</td>
          </tr>
        );
      }}
    />
  );
}
