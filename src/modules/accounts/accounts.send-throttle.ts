/**
 * Exact throttles for messages a stranger can make us send (SMS codes, reset and verification
 * mails). Each send is a row per subject in send_log; a send counts its subjects' rows inside
 * advisory locks on them, so N replicas together admit exactly the limit, which the in-memory
 * token buckets (shared as capacity ÷ N) cannot promise for limits as small as "1 per minute".
 */
import { and, eq, gt, lt, sql } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { AppError } from '../../platform/errors';
import { newId } from '../../platform/ids';
import { sendLog } from './accounts.tables';

export interface SendLimit {
  /** `phone:+8613…`, `email:a@b.c`, `ip:203.0.113.7` */
  subject: string;
  max: number;
  windowMs: number;
}

/** Rows older than the longest window any caller uses are deleted as new sends come. */
const KEEP_MS = 24 * 3600_000;

export function createSendThrottle(ctx: AppContext) {
  const { db } = ctx.database;

  /**
   * Records one `kind` send for every subject, or throws 429 (with Retry-After: when the oldest
   * counted send leaves its window) and records nothing when any limit is reached.
   */
  async function reserve(kind: string, limits: SendLimit[], message = 'too many requests; try again later'): Promise<void> {
    const now = ctx.clock.now();
    const subjects = [...new Set(limits.map((l) => l.subject))].sort();
    await db.transaction(async (tx) => {
      // Sorted, so two sends locking the same subjects never wait on each other in a circle.
      for (const subject of subjects) await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`send:${kind}:${subject}`}, 0))`);
      for (const limit of limits) {
        const since = new Date(now.getTime() - limit.windowMs);
        const rows = await tx
          .select({ createdAt: sendLog.createdAt })
          .from(sendLog)
          .where(and(eq(sendLog.kind, kind), eq(sendLog.subject, limit.subject), gt(sendLog.createdAt, since)))
          .orderBy(sendLog.createdAt)
          .limit(limit.max);
        if (rows.length >= limit.max) {
          const wait = Math.max(1, Math.ceil((rows[0]!.createdAt.getTime() + limit.windowMs - now.getTime()) / 1000));
          throw new AppError('rate_limited', message, { 'retry-after': String(wait) });
        }
      }
      await tx.insert(sendLog).values(subjects.map((subject) => ({ id: newId('snd'), kind, subject, createdAt: now })));
      await tx.delete(sendLog).where(and(eq(sendLog.kind, kind), sql`${sendLog.subject} in ${subjects}`, lt(sendLog.createdAt, new Date(now.getTime() - KEEP_MS))));
    });
  }

  return { reserve };
}

export type SendThrottle = ReturnType<typeof createSendThrottle>;
