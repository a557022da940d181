/**
 * The error contract's checks, shared by the in-process run (tests/platform/http-contract.test.ts)
 * and the run against dist/cpd (tests/e2e/error-shape.binary.test.ts): the status, JSON with our
 * content type, a body that is exactly {"error": string}, and an X-Request-Id.
 */
import { expect } from 'bun:test';

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

export function expectErrorShape(res: Answer, status: number, error: string | RegExp): void {
  expect({ status: res.status, type: res.headers.get('content-type') }).toEqual({ status, type: JSON_CONTENT_TYPE });
  const body = JSON.parse(res.text);
  expect(Object.keys(body)).toEqual(['error']);
  expect(body.error).toMatch(error);
  expect(res.headers.get('x-request-id')).toMatch(/^[\w.-]{1,64}$/);
}

/** The Anthropic-compatible routes answer errors in Anthropic's shape instead: {"type": "error", "error": {"type", "message"}}. */
export const speaksAnthropic = (path: string) => path === '/v1/messages' || path.startsWith('/v1/messages/');

/** True when `body` is exactly Anthropic's error object. */
export function isAnthropicError(body: unknown): boolean {
  const b = body as { type?: unknown; error?: { type?: unknown; message?: unknown } } | null;
  return (
    !!b && Object.keys(b).join() === 'type,error' && b.type === 'error' && !!b.error && Object.keys(b.error).join() === 'type,message' && typeof b.error.type === 'string' && typeof b.error.message === 'string'
  );
}
