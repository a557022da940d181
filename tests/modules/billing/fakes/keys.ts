import { generateKeyPairSync } from 'node:crypto';

/** A fresh RSA-2048 key pair as PEM (the test plays both the merchant and the provider). */
export function rsaKeyPair() {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    publicKey: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  };
}
