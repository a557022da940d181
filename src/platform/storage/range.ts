import { JSON_TYPE } from '../http/errors';

/** One `Range: bytes=…` request (RFC 9110 §14.1.2) resolved against a known size. */
export type ByteRange = { start: number; end: number }; // end exclusive

/**
 * null: no usable range (serve the whole body, 200); 'unsatisfiable': 416; else the one range.
 * Several ranges are answered with the whole body, which RFC 9110 allows.
 */
export function parseRange(header: string | null, size: number): ByteRange | 'unsatisfiable' | null {
  if (!header) return null;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return null;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size };
  }
  const start = Number(m[1]);
  const last = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size) return 'unsatisfiable';
  if (last < start) return null;
  return { start, end: last + 1 };
}

/** A 416 in the API's error shape ({"error"}), keeping the `Content-Range: bytes *\/size` header. */
export function rangeNotSatisfiable(headers: Record<string, string>): Response {
  return new Response(JSON.stringify({ error: 'requested range is not satisfiable' }), {
    status: 416,
    headers: { ...headers, 'content-type': JSON_TYPE },
  });
}

/** Headers and status for a body of `size` bytes given the request's Range (and If-Range vs etag). */
export function rangeResponseInit(
  request: Request,
  size: number,
  etag: string,
): { status: 200 | 206 | 416; range: ByteRange | null; headers: Record<string, string> } {
  const ifRange = request.headers.get('if-range');
  const range = ifRange && ifRange !== etag ? null : parseRange(request.headers.get('range'), size);
  if (range === 'unsatisfiable') return { status: 416, range: null, headers: { 'content-range': `bytes */${size}` } };
  if (!range) return { status: 200, range: { start: 0, end: size }, headers: { 'content-length': String(size) } };
  return {
    status: 206,
    range,
    headers: { 'content-length': String(range.end - range.start), 'content-range': `bytes ${range.start}-${range.end - 1}/${size}` },
  };
}
