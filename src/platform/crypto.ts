/**
 * Hashing, random bytes and secrets at rest. Bun's native crypto serves the common needs; Node's
 * `node:crypto` module is loaded only by what needs it (AES-GCM, HKDF, RSA keys and signatures):
 * importing it cost 3.3–3.9 ms of every start of the compiled binary (measured alone), and a
 * started server needs it only for the features that seal or sign.
 */
type NodeCrypto = typeof import('node:crypto');
let nodeCryptoModule: NodeCrypto | undefined;

/** `node:crypto`, loaded at the first call. */
export const nodeCrypto = (): NodeCrypto => (nodeCryptoModule ??= require('node:crypto') as NodeCrypto);

/** Bun's one-shot hasher: a third of `createHash` per call, and every API key request hashes its key. */
export const sha256Hex = (value: string | Uint8Array) => Bun.SHA256.hash(value, 'hex');

export const hmacHex = (key: string, value: string) => new Bun.CryptoHasher('sha256', key).update(value).digest('hex');

/** `length` bytes from the operating system's CSPRNG. */
export function randomBytes(length: number): Buffer {
  const bytes = Buffer.allocUnsafe(length);
  // getRandomValues fills at most 65,536 bytes per call.
  for (let at = 0; at < length; at += 65_536) crypto.getRandomValues(bytes.subarray(at, Math.min(length, at + 65_536)));
  return bytes;
}

/** Constant-time string comparison (hashes both sides so lengths never leak). */
export function safeEqual(a: string, b: string): boolean {
  return crypto.timingSafeEqual(Bun.SHA256.hash(a), Bun.SHA256.hash(b));
}

/**
 * Authenticated encryption of small secrets at rest (for example upstream API keys): AES-256-GCM
 * with a key derived from `secret` by HKDF-SHA256 for one `purpose`, a random 96-bit nonce per
 * value. Sealed form: "v1.<nonce>.<ciphertext+tag>" in base64url. open() throws on any tampering
 * or on a value sealed under another secret.
 */
export function secretBox(secret: string, purpose: string) {
  const { createCipheriv, createDecipheriv, hkdfSync } = nodeCrypto();
  const key = Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), `cpd ${purpose}`, 32));
  return {
    seal(plaintext: string): string {
      const nonce = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, nonce);
      const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
      return `v1.${nonce.toString('base64url')}.${body.toString('base64url')}`;
    },
    open(sealed: string): string {
      const [version, nonce, body] = sealed.split('.');
      if (version !== 'v1' || !nonce || !body) throw new Error('not a sealed value');
      const bytes = Buffer.from(body, 'base64url');
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(nonce, 'base64url'));
      decipher.setAuthTag(bytes.subarray(bytes.length - 16));
      return Buffer.concat([decipher.update(bytes.subarray(0, bytes.length - 16)), decipher.final()]).toString('utf8');
    },
  };
}
