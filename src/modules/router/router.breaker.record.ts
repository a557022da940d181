/**
 * What a breaker change leaves behind: a log line and an audit entry by the system actor. Each
 * process keeps its own breakers, so the entry names the process (`replica`) whose breaker moved;
 * N replicas may each record the same backend opening.
 */
import type { AppContext } from '../../app-context';
import type { AuditEntry } from '../audit';
import type { BreakerChange } from './router.breaker';

export interface AuditSink {
  record(entry: AuditEntry): Promise<void>;
}

export function recordBreakerChange(ctx: AppContext, audit: AuditSink | undefined, replica: string, backend: { model: string; url: string }, change: BreakerChange) {
  const details = {
    model: backend.model,
    backend: backend.url,
    from: change.from,
    to: change.to,
    replica,
    ...(change.attempts !== null ? { attempts: change.attempts, failures: change.failures } : {}),
    ...(change.probeAt !== null ? { probe_at: new Date(change.probeAt).toISOString() } : {}),
  };
  ctx.log[change.to === 'open' ? 'warn' : 'info']({ msg: 'router breaker changed', ...details });
  // The request that moved the breaker does not wait for the entry; a lost entry is logged.
  audit
    ?.record({ actor: 'system', action: 'router.breaker', target: `${backend.model} ${backend.url}`, details })
    .catch((err) => ctx.log.warn({ err, ...details }, 'could not record a router breaker change in the audit log'));
}
