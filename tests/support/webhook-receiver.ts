/**
 * A webhook receiver as a customer would run one (Bun.serve): it checks every Cpd-Signature on
 * its own (HMAC-SHA256 of "<t>.<body>" with the endpoint's secret, by node:crypto, not by our
 * code), and counts what arrived per event id. `mode` says how it answers: 200, 500, or never
 * (the sender's timeout ends the attempt).
 *
 *   const rx = startReceiver();
 *   rx.secret = created.secret;
 *   await waitFor(() => rx.received.length);
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface Received {
  eventId: string;
  type: string;
  body: any;
  /** The signature verified against `secret` and the raw body. */
  valid: boolean;
  /** The signed time (unix seconds). */
  t: number;
  /** When it arrived (Date.now()). */
  at: number;
  /** What the receiver answered (0 while it hangs). */
  answered: number;
  headers: Headers;
}

export function verifySignature(secret: string, header: string | null, raw: string): { valid: boolean; t: number } {
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header ?? '');
  if (!m) return { valid: false, t: 0 };
  const expected = createHmac('sha256', secret).update(`${m[1]}.${raw}`).digest();
  return { valid: timingSafeEqual(expected, Buffer.from(m[2]!, 'hex')), t: Number(m[1]) };
}

export function startReceiver(opts: { mode?: 'ok' | 'fail' | 'hang' } = {}) {
  const state = {
    mode: opts.mode ?? 'ok',
    secret: '',
    /** Every request, answered or not. */
    received: [] as Received[],
  };
  const hanging = new Set<() => void>();
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      const raw = await req.text();
      let body: any = null;
      try {
        body = JSON.parse(raw);
      } catch {}
      const { valid, t } = verifySignature(state.secret, req.headers.get('cpd-signature'), raw);
      const received: Received = { eventId: body?.id, type: body?.type, body, valid, t, at: Date.now(), answered: 0, headers: req.headers };
      state.received.push(received);
      if (state.mode === 'fail') {
        received.answered = 500;
        return new Response('receiver failing on purpose', { status: 500 });
      }
      if (state.mode === 'hang') {
        // Answered only when the receiver stops; the sender gives up first.
        await new Promise<void>((resolve) => hanging.add(resolve));
        return new Response('late', { status: 200 });
      }
      received.answered = 200;
      return new Response('ok');
    },
  });
  return Object.assign(state, {
    url: `http://127.0.0.1:${server.port}/hook`,
    /** How many requests arrived for each event id. */
    countsByEvent(): Map<string, number> {
      const counts = new Map<string, number>();
      for (const r of state.received) counts.set(r.eventId, (counts.get(r.eventId) ?? 0) + 1);
      return counts;
    },
    async close() {
      for (const resolve of hanging) resolve();
      server.stop(true);
    },
  });
}

export type Receiver = ReturnType<typeof startReceiver>;
