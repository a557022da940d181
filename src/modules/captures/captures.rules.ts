/**
 * The admin's capture rules and retention (PUT /api/admin/router/capture), kept in memory for the
 * gateway's per-request decision and reloaded from the database every RELOAD_MS, so another
 * replica's change holds here within that time; this process's own change holds at once.
 */
import { eq } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { captureSettings } from './captures.tables';

export interface CaptureRule {
  user_id?: string;
  model?: string;
  /** The share of matching requests captured, 0..1. */
  sample: number;
}

export interface CaptureSettings {
  rules: CaptureRule[];
  retention_days: number;
}

export const DEFAULT_RETENTION_DAYS = 30;
const SETTINGS_ID = 'settings';
const RELOAD_MS = 5_000;

export function createCaptureRules(ctx: AppContext) {
  const { db } = ctx.database;
  let current: CaptureSettings = { rules: [], retention_days: DEFAULT_RETENTION_DAYS };
  /** Bumped by this process's own change: a reload that read before it does not undo it. */
  let changes = 0;

  async function load(): Promise<CaptureSettings> {
    const before = changes;
    const [row] = await db.select().from(captureSettings).where(eq(captureSettings.id, SETTINGS_ID)).limit(1);
    if (changes === before) current = row ? { rules: row.rules, retention_days: row.retentionDays } : { rules: [], retention_days: DEFAULT_RETENTION_DAYS };
    return current;
  }

  const timer = setInterval(() => void load().catch((err) => ctx.log.warn({ err }, 'could not reload the capture rules')), RELOAD_MS);
  timer.unref?.();
  ctx.onShutdown(() => clearInterval(timer));

  async function replace(next: CaptureSettings): Promise<CaptureSettings> {
    const rules = next.rules.map((r) => ({ ...(r.user_id ? { user_id: r.user_id } : {}), ...(r.model ? { model: r.model } : {}), sample: r.sample }));
    const row = { id: SETTINGS_ID, rules, retentionDays: next.retention_days, updatedAt: ctx.clock.now() };
    await db.insert(captureSettings).values(row).onConflictDoUpdate({ target: captureSettings.id, set: { rules, retentionDays: row.retentionDays, updatedAt: row.updatedAt } });
    changes++;
    current = { rules, retention_days: next.retention_days };
    return current;
  }

  /** Whether a request of `userId` for `model` (as asked) is sampled by the first rule that matches it. */
  function sampled(userId: string, model: string): boolean {
    const rule = current.rules.find((r) => (!r.user_id || r.user_id === userId) && (!r.model || r.model === model));
    return rule !== undefined && rule.sample > 0 && Math.random() < rule.sample;
  }

  return { load, replace, sampled, current: () => current };
}

export type CaptureRules = ReturnType<typeof createCaptureRules>;
