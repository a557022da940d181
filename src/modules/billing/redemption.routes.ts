/**
 * Redemption codes: the admin's batches (POST creates and shows the codes once, as JSON or, with
 * `Accept: text/csv`, as the CSV a shop imports; GET lists; DELETE disables the unused ones) and
 * the user's POST /api/billing/redeem.
 */
import { Elysia, t } from 'elysia';
import type { authPlugin } from '../../platform/http/auth';
import type { AuditService } from '../audit';
import type { Redemption } from './redemption';

const CodeBatchBody = t.Object({
  count: t.Integer({ minimum: 1, maximum: 1000 }),
  amount: t.Number({ exclusiveMinimum: 0, description: 'major units of the site currency, at most 6 decimals' }),
  expires_at: t.Optional(t.Union([t.String({ maxLength: 40 }), t.Null()])),
  note: t.Optional(t.Union([t.String({ maxLength: 500 }), t.Null()])),
});

/** One CSV line (RFC 4180): every value here is plain but the note, quoted when needed. */
const csvField = (v: unknown) => {
  const text = v === null || v === undefined ? '' : String(v);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
};
const csvLine = (values: unknown[]) => `${values.map(csvField).join(',')}\r\n`;

export const redemptionRoutes = (deps: { auth: ReturnType<typeof authPlugin>; redemption: Redemption; audit: AuditService }) =>
  new Elysia({ name: 'cpd/billing/redemption', detail: { tags: ['billing'] } })
    .use(deps.auth)
    .post(
      '/api/admin/billing/codes',
      async ({ caller, body, headers, set }) => {
        const batch = await deps.redemption.createBatch(body);
        // Never the codes themselves in the audit log: they are money.
        await deps.audit.record({
          actor: { userId: caller.userId, email: caller.email },
          action: 'billing.codes.create',
          target: batch.batch_id,
          details: { count: body.count, amount: batch.amount, currency: batch.currency, expires_at: batch.expires_at, note: body.note ?? null },
        });
        set.status = 201;
        if (!headers.accept?.includes('text/csv')) return batch;
        const csv = csvLine(['code', 'amount', 'currency', 'expires_at', 'batch_id']) + batch.codes.map((code) => csvLine([code, batch.amount, batch.currency, batch.expires_at, batch.batch_id])).join('');
        return new Response(csv, {
          status: 201,
          headers: { 'content-type': 'text/csv; charset=utf-8', 'content-disposition': `attachment; filename="codes-${batch.batch_id}.csv"`, 'x-batch-id': batch.batch_id },
        });
      },
      { auth: ['admin'], body: CodeBatchBody, detail: { summary: 'Create a batch of redemption codes (shown once; Accept: text/csv for the CSV)' } },
    )
    .get('/api/admin/billing/codes', ({ query }) => deps.redemption.list(query.batch_id, query.limit), {
      auth: ['admin'],
      query: t.Object({ batch_id: t.Optional(t.String({ maxLength: 100 })), limit: t.Optional(t.Numeric({ minimum: 1, maximum: 10_000, multipleOf: 1 })) }),
      detail: { summary: 'Redemption codes (prefix and status, never the code), newest batch first' },
    })
    .delete(
      '/api/admin/billing/codes/:batchId',
      async ({ caller, params }) => {
        const result = await deps.redemption.disableBatch(params.batchId);
        await deps.audit.record({ actor: { userId: caller.userId, email: caller.email }, action: 'billing.codes.disable', target: params.batchId, details: { disabled: result.disabled } });
        return result;
      },
      { auth: ['admin'], params: t.Object({ batchId: t.String({ maxLength: 100 }) }), detail: { summary: "Disable a batch's unused codes" } },
    )
    .post('/api/billing/redeem', ({ caller, body }) => deps.redemption.redeem(caller.userId, body.code), {
      auth: ['session'],
      body: t.Object({ code: t.String({ minLength: 1, maxLength: 100 }) }),
      detail: { summary: 'Redeem a code into one top-up; every refusal is 400 "invalid code"; 10 failures an hour, then 429' },
    });
