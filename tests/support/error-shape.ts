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
