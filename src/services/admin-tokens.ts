import type { Kysely } from 'kysely';
import {
  checkTokenName,
  generateAdminToken,
  hashAdminToken,
  isWellFormedAdminToken,
} from '../domain/admin-token.js';
import { errors } from '../domain/errors.js';
import { secretsMatch } from '../security/token.js';
import {
  countLiveAdminTokens,
  findAdminToken,
  findLiveAdminTokenByHash,
  insertAdminToken,
  listAdminTokens,
  revokeAdminToken,
  touchAdminToken,
} from '../storage/admin-tokens.js';
import type { AdminTokenRow, Database } from '../storage/schema.js';
import { isUniqueViolation } from '../storage/unique-violation.js';

/** A token as people see it: never the token itself, which is shown once, at creation. */
export interface AdminToken {
  readonly id: number;
  readonly name: string;
  readonly prefix: string;
  readonly createdAt: number;
  readonly lastUsedAt: number | null;
  readonly revokedAt: number | null;
}

export function toAdminToken(row: AdminTokenRow): AdminToken {
  return {
    id: row.id,
    name: row.name,
    prefix: row.token_prefix,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
    revokedAt: row.revoked_at,
  };
}

/** Live tokens at most: enough for every pipeline a team runs, few enough to review. */
export const MAX_LIVE_ADMIN_TOKENS = 100;
/** `last_used_at` moves at most this often per token, so calls do not each cost a write. */
const TOUCH_EVERY_MS = 60_000;

/**
 * Admin tokens of the management API (product.md §13), created and revoked by the CLI and the
 * dashboard. A token is checked for its shape and checksum before any lookup, then found by the
 * SHA-256 of it; a revoked token is refused by the next call, in every process (nothing is kept
 * in memory).
 */
export class AdminTokenService {
  private readonly touched = new Map<number, number>();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly now: () => number = Date.now,
  ) {}

  /** Creates a token; the token itself is returned here and never again. */
  async create(name: string): Promise<{ token: AdminToken; secret: string }> {
    const checked = checkTokenName(name);
    if ((await countLiveAdminTokens(this.db)) >= MAX_LIVE_ADMIN_TOKENS)
      throw errors.invalidInput(
        `There can be at most ${MAX_LIVE_ADMIN_TOKENS} admin tokens; revoke one you no longer use`,
      );
    const generated = generateAdminToken();
    try {
      const row = await insertAdminToken(this.db, {
        name: checked,
        token_hash: generated.hash,
        token_prefix: generated.prefix,
        created_at: this.now(),
      });
      return { token: toAdminToken(row), secret: generated.key };
    } catch (error) {
      if (isUniqueViolation(error)) throw errors.adminTokenExists(checked);
      throw error;
    }
  }

  async list(): Promise<AdminToken[]> {
    return (await listAdminTokens(this.db)).map(toAdminToken);
  }

  /**
   * Revokes a token: every call made with it from now on is refused. A token revoked already is
   * left as it is (`unchanged`), so a revoke repeated by a script is not an error.
   */
  async revoke(id: string | number): Promise<{ token: AdminToken; outcome: 'revoked' | 'unchanged' }> {
    const text = String(id).trim();
    if (!/^\d{1,15}$/.test(text))
      throw errors.invalidField(
        `An admin token's id is a whole number (as token lists show it), got ${JSON.stringify(text.slice(0, 40))}`,
      );
    const tokenId = Number(text);
    const revoked = await revokeAdminToken(this.db, tokenId, this.now());
    const row = await findAdminToken(this.db, tokenId);
    if (row === undefined) throw errors.adminTokenNotFound(text);
    this.touched.delete(tokenId);
    return { token: toAdminToken(row), outcome: revoked ? 'revoked' : 'unchanged' };
  }

  /**
   * The live token a bearer token is, or null. Tokens of the wrong shape or checksum (an API key,
   * a typo, a guess) are refused without a lookup. The stored hash is compared again in constant
   * time: the lookup itself can only tell whether a hash exists, which needs the token.
   */
  async authenticate(token: string | null): Promise<AdminToken | null> {
    if (token === null || !isWellFormedAdminToken(token)) return null;
    const hash = hashAdminToken(token);
    const row = await findLiveAdminTokenByHash(this.db, hash);
    if (row === undefined || !secretsMatch(hash, row.token_hash)) return null;
    await this.touch(row.id);
    return toAdminToken(row);
  }

  private async touch(id: number): Promise<void> {
    const now = this.now();
    const last = this.touched.get(id);
    if (last !== undefined && now - last < TOUCH_EVERY_MS) return;
    if (this.touched.size >= 10_000) this.touched.clear();
    this.touched.set(id, now);
    await touchAdminToken(this.db, id, now);
  }
}
