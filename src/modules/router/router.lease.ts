/**
 * A backend lease: a request counts in its backend's in-flight load (least-loaded routing) from
 * the attempt until release(), which also ends the attempt's timers and abort wiring. Release is
 * idempotent, so every way a request ends may call it. To a half-open breaker the lease is its
 * probe; one released without a verdict (the client went away) lets another request probe.
 */
import type { Backend } from './router.backends';
import { type AttemptControl, type AttemptDeadline, AttemptError, attemptController } from './router.upstream';

export interface BackendLease {
  backend: Backend;
  control: AttemptControl;
  /** Stops the upstream request (the client went away). */
  abort(): void;
  /** True when the upstream request was stopped because the client went away. */
  readonly clientGone: boolean;
  release(): void;
}

export function leaseBackend(backend: Backend, signal: AbortSignal | undefined, deadline?: AttemptDeadline): BackendLease {
  const control = attemptController(signal, deadline);
  backend.inflight++;
  let released = false;
  const lease: BackendLease = {
    backend,
    control,
    abort: () => control.abort(new AttemptError('aborted', 'client went away')),
    get clientGone() {
      const reason = control.signal.reason;
      return control.signal.aborted && reason instanceof AttemptError && reason.reason === 'aborted';
    },
    release() {
      if (released) return;
      released = true;
      backend.inflight--;
      backend.breaker?.end(lease);
      control.dispose();
    },
  };
  backend.breaker?.begin(lease);
  return lease;
}
