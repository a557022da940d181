/**
 * `Cpd-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>` (docs/webhooks.md
 * shows receivers how to check it). The time is signed with the body, so a receiver can refuse
 * an old delivery replayed at it.
 */
import { hmacHex, secretBox } from '../../platform/crypto';

export function signatureHeader(secret: string, body: string, at: Date): string {
  const t = Math.floor(at.getTime() / 1000);
  return `t=${t},v1=${hmacHex(secret, `${t}.${body}`)}`;
}

/**
 * Endpoint secrets at rest: sealed with SECRET_KEY (the server signs with them, so they must be
 * recoverable). The key is derived at first use, as SECRET_KEY is read lazily.
 */
export function secretSealer(secretKey: () => string) {
  let box: ReturnType<typeof secretBox> | null = null;
  const opened = () => {
    box ??= secretBox(secretKey(), 'webhook secret');
    return box;
  };
  return { seal: (secret: string) => opened().seal(secret), open: (sealed: string) => opened().open(sealed) };
}
