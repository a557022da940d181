/**
 * Daily cost by model (or user, or entrypoint) over a range of days in the browser's time zone,
 * from the router cost report (GET /v1/router/cost, in the site's currency): one report per local day, so each point
 * is exact for that day. Drawn with uPlot; the same numbers are listed in a table for screen
 * readers and for anyone who wants the figures. uPlot's code is a separate chunk, loaded when a
 * chart is first drawn, so the login page does not carry it.
 */
import 'uplot/dist/uPlot.min.css';
import { useEffect, useRef, useState } from 'preact/hooks';
import { get, withQuery } from './api';
import { currency, formatDay, t } from './locale';
import { formatMicros, toMicros } from './money';
import { Alert, errorText } from './ui';

/** member: an organization's report (orgId) by the member whose keys made the requests. */
export type GroupBy = 'model' | 'user' | 'entrypoint' | 'member';
interface CostRow {
  user?: string;
  member?: string;
  model?: string;
  entrypoint?: string;
  cost: number;
  tokens: number;
}
interface Series {
  days: Date[];
  groups: string[];
  /** micros[group][day] */
  micros: bigint[][];
}

const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#4d7c0f', '#be185d'];

/** Local midnights from `from` to `to` inclusive (dates as YYYY-MM-DD). */
export function localDays(from: string, to: string): Date[] {
  const [fy, fm, fd] = from.split('-').map(Number);
  const [ty, tm, td] = to.split('-').map(Number);
  const days: Date[] = [];
  for (
    let d = new Date(fy!, fm! - 1, fd!);
    d <= new Date(ty!, tm! - 1, td!) && days.length < 92;
    d = new Date(d.getFullYear(), d.getMonth(), d.getDate() + 1)
  )
    days.push(d);
  return days;
}

async function loadSeries(days: Date[], groupBy: GroupBy, only?: string, orgId?: string): Promise<Series> {
  const reports = await Promise.all(
    days.map((day) => {
      const next = new Date(day.getFullYear(), day.getMonth(), day.getDate() + 1);
      return get<{ items: CostRow[] }>(
        withQuery('/v1/router/cost', {
          from: day.toISOString(),
          to: next.toISOString(),
          group_by: groupBy,
          currency: 'site',
          org_id: orgId,
        }),
      );
    }),
  );
  const groups = [...new Set(reports.flatMap((r) => r.items.map((row) => row[groupBy] ?? '')))].filter((g) => !only || g === only).sort();
  const micros = groups.map((g) =>
    reports.map((r) => r.items.filter((row) => row[groupBy] === g).reduce((sum, row) => sum + toMicros(row.cost), 0n)),
  );
  return { days, groups, micros };
}

/** `orgId`: the report of that organization (its owners and admins see it) instead of the caller's own. */
export function DailyCostChart({ days, groupBy, only, orgId }: { days: Date[]; groupBy: GroupBy; only?: string; orgId?: string }) {
  const [series, setSeries] = useState<Series | null>(null);
  const [error, setError] = useState<string | null>(null);
  const box = useRef<HTMLDivElement>(null);
  const key = `${days[0]?.getTime()}-${days.length}-${groupBy}-${only ?? ''}-${orgId ?? ''}`;

  useEffect(() => {
    let live = true;
    setSeries(null);
    loadSeries(days, groupBy, only, orgId).then(
      (s) => live && setSeries(s),
      (e) => live && setError(errorText(e)),
    );
    return () => {
      live = false;
    };
  }, [key]);

  useEffect(() => {
    const target = box.current;
    if (!series || !target || series.groups.length === 0) return;
    let plot: { destroy(): void } | null = null;
    let live = true;
    import('uplot').then(
      ({ default: uPlot }) => {
        if (!live) return;
        // Axis labels in the page's text colour, so they stay readable in the dark palette.
        const ink = getComputedStyle(target).color;
        plot = new uPlot(
          {
            width: Math.min(target.clientWidth || 720, 960),
            height: 260,
            scales: { x: { time: true } },
            // Axis and legend in the page's language and the site's currency, like the table below; ink readable in dark.
            axes: [
              { stroke: ink, values: (_, ticks) => ticks.map((v) => formatDay(new Date(v * 1000))) },
              { stroke: ink, size: 90, values: (_, ticks) => ticks.map((v) => formatMicros(toMicros(v), currency)) },
            ],
            series: [
              { label: t('chart.day'), value: (_, v) => (v === null ? '—' : formatDay(new Date(v * 1000))) },
              ...series.groups.map((g, i) => ({
                label: g,
                stroke: COLORS[i % COLORS.length],
                width: 2,
                points: { show: true, size: 6 },
                value: (_: unknown, v: number | null) => (v === null ? '—' : formatMicros(toMicros(v), currency)),
              })),
            ],
          },
          [series.days.map((d) => d.getTime() / 1000), ...series.micros.map((row) => row.map((m) => Number(m) / 1_000_000))],
          target,
        );
      },
      (e) => live && setError(errorText(e)),
    );
    return () => {
      live = false;
      plot?.destroy();
    };
  }, [series]);

  if (error) return <Alert>{error}</Alert>;
  if (!series) return <p aria-busy="true">{t('loading')}</p>;
  return (
    <figure class="chart">
      <figcaption>{t('chart.caption', { group: t(`chart.by.${groupBy}` as 'chart.by.model') })}</figcaption>
      {series.groups.length === 0 ? <p>{t('chart.empty')}</p> : <div ref={box} data-testid="cost-chart" />}
      {series.groups.length > 0 && (
        <table class="chart-data">
          <caption class="visually-hidden">{t('chart.caption', { group: t(`chart.by.${groupBy}` as 'chart.by.model') })}</caption>
          <thead>
            <tr>
              <th>{t('chart.day')}</th>
              {series.groups.map((g) => (
                <th class="num">{g}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            {series.days.map((day, i) =>
              series.micros.some((row) => row[i] !== 0n) ? (
                <tr>
                  <td>{formatDay(day)}</td>
                  {series.micros.map((row) => (
                    <td class="num">{formatMicros(row[i]!, currency)}</td>
                  ))}
                </tr>
              ) : null,
            )}
          </tbody>
        </table>
      )}
    </figure>
  );
}
