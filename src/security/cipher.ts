import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/** What each key derived from the instance secret seals: a key serves one purpose only. */
export const SEALED = {
  smtpPassword: 'herald:smtp-password',
  webhookSecret: 'herald:webhook-secret',
  secretCheck: 'herald:secret-check',
} as const;

/**
 * Encrypts secrets at rest (SMTP passwords) with AES-256-GCM. The key is derived from the instance
 * secret with HKDF, bound to a purpose string, so keys derived from the same secret for other
 * purposes are unrelated to this one. Stored form: `v1:` + base64(iv ‖ tag ‖ ciphertext).
 */
export class SecretBox {
  private readonly key: Buffer;

  constructor(secret: string, purpose: string = SEALED.smtpPassword) {
    this.key = Buffer.from(hkdfSync('sha256', secret, 'herald', purpose, 32));
  }

  seal(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return 'v1:' + Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
  }

  open(sealed: string): string {
    if (!sealed.startsWith('v1:')) throw new Error('Unknown secret format');
    const raw = Buffer.from(sealed.slice(3), 'base64');
    const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(12, 28));
    try {
      return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
    } catch {
      throw new Error(
        'Cannot decrypt a stored secret: HERALD_SECRET_KEY differs from the one it was stored with',
      );
    }
  }
}
