/** Helpers for the admin tests: the audit log as the API shows it. */
import type { TestApp } from '../../support/app';

export interface AuditEntryView {
  id: string;
  actor_id: string | null;
  actor_email: string | null;
  action: string;
  target: string;
  details: Record<string, any>;
  created_at: string;
}

/** Every audit entry, newest first, read page by page through GET /api/admin/audit. */
export async function auditEntries(t: Pick<TestApp, 'request'>, adminToken: string): Promise<AuditEntryView[]> {
  const entries: AuditEntryView[] = [];
  let cursor: string | null = null;
  do {
    const res: { status: number; body: any } = await t.request('GET', `/api/admin/audit?limit=200${cursor ? `&cursor=${cursor}` : ''}`, { token: adminToken });
    if (res.status !== 200) throw new Error(`audit list answered ${res.status}`);
    entries.push(...res.body.entries);
    cursor = res.body.next_cursor;
  } while (cursor);
  return entries;
}
