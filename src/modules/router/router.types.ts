/** The router's request types, shared by the service and the embeddings entry point. */
import type { Chunk, Need, Price, RequestBound, Ticket, UsageCounts, UsageRecord } from '../metering';
import type { BackendLease } from './router.lease';

export interface ChatCaller {
  userId: string;
  keyId: string | null;
}

export interface ChatRequest {
  /** null: an unbilled open agent call (usage row with no user, reported as `anonymous`; no debit). */
  caller: ChatCaller | null;
  body: Record<string, unknown>;
  /** Aborts the upstream request (the client went away). */
  signal?: AbortSignal;
  /** Size of the request as received, for the admission's upper bound; defaults to the JSON length. */
  bodyBytes?: number;
  requestId?: string;
  /** The usage row's entrypoint instead of the body's model (a replay's is `replay`). */
  entrypoint?: string;
  /** Told the request's usage record once it is made (the captures module reads its id, backend, tokens, cost). */
  onUsage?: (record: UsageRecord) => void;
}

/** An opened stream: headers may be sent; iterate for chunks (the last carries usage and cost). */
export interface ChatStream extends AsyncIterable<Chunk> {
  model: string;
  /** The cost known when the first token arrived (prompt + first chunk); the final chunk has the definitive one. */
  headerCostMicros: bigint;
  /** Stops the upstream request; the stream then ends and bills what was delivered. */
  abort(): void;
}

export interface Candidate {
  slug: string;
  price: Price;
}

export interface Plan {
  entrypoint: string;
  candidates: Candidate[];
  /** The request's upper bound of cost, and the least it can be served with (the most of either over the candidates). */
  need: Need;
  /** A chat request's prompt and completion bound; null for a kind without completion. */
  bound: RequestBound | null;
}

/**
 * A request past admission: its plan, its holds on the wallet and the key (none for anonymous
 * calls), what they hold (its upper bound, or less: then its completion has an allowance), its start.
 */
export interface Admitted {
  req: ChatRequest;
  plan: Plan;
  ticket: Ticket | null;
  holdMicros: bigint;
  started: number;
  /** An organization's key: the member's budget id its spend is also counted under. */
  memberKey?: string | null;
}

/** The candidate that answered and the lease on its backend. */
export interface Served {
  candidate: Candidate;
  lease: BackendLease;
}

/** What commit() records for a request. */
export interface Metered {
  model: string;
  backend: string | null;
  /** As reported (or counted); the cost may be of fewer completion tokens (`clamped`). */
  counts: UsageCounts;
  costMicros: bigint;
  status: number;
  streamed: boolean;
  aborted: boolean;
  /** The completion was billed at the request's maximum, below what was reported. */
  clamped: boolean;
}

/**
 * What kind of request a body is: how it is validated and how its cost is bounded for admission.
 * Without `estimate` it is a chat request, bounded by its prompt and completion (metering.pricing.ts).
 */
export interface RequestKind {
  validate(body: unknown): asserts body is Record<string, unknown>;
  estimate?(price: Price, bodyBytes: number, body: Record<string, unknown>): bigint;
}
