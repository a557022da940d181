/**
 * The audit log: who changed what, appended by every admin write (HTTP or shell). Modules call
 * record() through index.ts, inside the write's own transaction when they have one, so an entry
 * exists exactly when the write committed. The table refuses UPDATE and DELETE (a trigger).
 */
import { and, desc, eq } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { decodeCursor, olderThan, page } from '../../platform/cursor';
import type { DbOrTx } from '../../platform/db';
import { newId } from '../../platform/ids';
import { auditLog } from './audit.tables';

/** Who did it: an admin's session, or the shell (no account; details.via = 'cli'). */
export type AuditActor = { userId: string; email: string | null } | 'cli';

export interface AuditEntry {
  actor: AuditActor;
  /** Dotted verb: `user.update`, `user.password`, `wallet.adjust`, `payment.reconcile`, `pricing.models`, … */
  action: string;
  target: string;
  /** What changed, never a secret (a new password is recorded as the fact, not the value). */
  details?: Record<string, unknown>;
}

export function createAuditService(ctx: AppContext) {
  const { db } = ctx.database;

  async function record(entry: AuditEntry, on: DbOrTx = db): Promise<void> {
    const cli = entry.actor === 'cli';
    await on.insert(auditLog).values({
      id: newId('aud'),
      createdAt: ctx.clock.now(),
      actorId: cli ? null : (entry.actor as Exclude<AuditActor, 'cli'>).userId,
      actorEmail: cli ? null : (entry.actor as Exclude<AuditActor, 'cli'>).email,
      action: entry.action,
      target: entry.target,
      details: cli ? { ...entry.details, via: 'cli' } : (entry.details ?? {}),
    });
  }

  /** Every entry, or (`target`) the entries about one thing (an organization's own log), newest first. */
  async function list(query: { limit: number; cursor?: string; target?: string }) {
    const rows = await db
      .select()
      .from(auditLog)
      .where(and(query.target === undefined ? undefined : eq(auditLog.target, query.target), olderThan(auditLog, auditLog.createdAt, auditLog.id, decodeCursor(query.cursor))))
      .orderBy(desc(auditLog.createdAt), desc(auditLog.id))
      .limit(query.limit + 1);
    const { items, nextCursor } = page(rows, query.limit);
    return {
      entries: items.map((r) => ({
        id: r.id,
        actor_id: r.actorId,
        actor_email: r.actorEmail,
        action: r.action,
        target: r.target,
        details: r.details as Record<string, unknown>,
        created_at: r.createdAt.toISOString(),
      })),
      next_cursor: nextCursor,
    };
  }

  return { record, list };
}

export type AuditService = ReturnType<typeof createAuditService>;
