/**
 * Where an endpoint may point (SSRF): https only, and a host that resolves only to public
 * addresses: not loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local
 * (169.254/16, fe80::/10), CGNAT (100.64/10), unspecified, multicast or reserved. Checked when the
 * URL is saved and again before every delivery, which then connects to the address checked (a
 * name may resolve elsewhere since, or between a check and a connection: DNS rebinding).
 * WEBHOOK_ALLOW_PRIVATE=true lifts both rules (a receiver on the operator's network).
 */
import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { AppError } from '../../platform/errors';

const REFUSED = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  REFUSED.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  // NAT64 and 6to4 carry an IPv4 address inside, which may be a private one.
  ['64:ff9b::', 96],
  ['2002::', 16],
] as const)
  REFUSED.addSubnet(net, prefix, 'ipv6');

/** Whether an address is one an endpoint may not reach (IPv4-mapped IPv6 is judged as its IPv4). */
export function isRefusedAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return true;
  return REFUSED.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/** The URL's host without IPv6 brackets. */
const hostOf = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, '$1');

/** Every address the host resolves to (an IP literal: itself); throws AppError('invalid') when it does not resolve. */
async function addressesOf(url: URL): Promise<string[]> {
  const host = hostOf(url);
  if (isIP(host)) return [host];
  try {
    return (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
  } catch {
    throw new AppError('invalid', `url: the host "${host}" does not resolve`);
  }
}

/**
 * The endpoint URL as saved: parsed, https (http too when private addresses are allowed), at most
 * 2048 characters, no credentials in it, and (unless allowed) resolving to public addresses only.
 */
export async function checkEndpointUrl(raw: string, allowPrivate: boolean): Promise<string> {
  if (raw.length > 2048) throw new AppError('invalid', 'url must be at most 2048 characters');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new AppError('invalid', 'url must be an absolute https:// URL');
  }
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) throw new AppError('invalid', 'url must be https://');
  if (url.username || url.password) throw new AppError('invalid', 'url must not carry a user name or password');
  if (!allowPrivate) await refusePrivate(url);
  return url.toString();
}

/**
 * Throws AppError('invalid') when the URL's host resolves to any address an endpoint may not
 * reach; answers the addresses it resolved to (all of them allowed).
 */
export async function refusePrivate(url: URL): Promise<string[]> {
  const addresses = await addressesOf(url);
  const refused = addresses.find(isRefusedAddress);
  if (refused !== undefined)
    throw new AppError('invalid', `url must not point at a loopback, private or link-local address (${hostOf(url)} is ${refused})`);
  return addresses;
}

/** Where a delivery connects, and what it tells the server: its Host header and TLS server name (SNI, and the name the certificate must carry). */
export interface Target {
  url: URL;
  host?: string;
  serverName?: string;
}

/**
 * The URL with its host name replaced by `address`, and the name kept for the Host header and
 * TLS: the request then goes to the address that was checked, not to whatever a second lookup
 * answers (DNS rebinding between the check and the connection).
 */
export function pinTo(url: URL, address: string): Target {
  const name = hostOf(url);
  if (isIP(name)) return { url };
  const pinned = new URL(url);
  pinned.hostname = isIP(address) === 6 ? `[${address}]` : address;
  return { url: pinned, host: url.host, serverName: name };
}

/** The delivery's target: checked and pinned to the first address, or the URL as saved when private addresses are allowed. */
export async function deliveryTarget(url: URL, allowPrivate: boolean): Promise<Target> {
  if (allowPrivate) return { url };
  const [first] = await refusePrivate(url);
  return pinTo(url, first!);
}
