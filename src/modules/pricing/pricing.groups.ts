/**
 * Price groups: a user's every gateway and agent cost is multiplied by their group's multiplier
 * (held, debited, reported alike). Groups and the users placed in one (a user without a row is in
 * `default`, ×1, which always exists) are cached in memory, because the router prices each request
 * synchronously; a change in any process sends NOTIFY cpd_price_groups and every process reloads
 * (within a second, as the pricing catalog and the router's backends do).
 */
import { asc, eq, inArray, notInArray } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { followChanges, serialReload } from '../../platform/db';
import { AppError } from '../../platform/errors';
import { priceGroups, userPriceGroups } from './pricing.tables';

const CHANNEL = 'cpd_price_groups';
export const DEFAULT_GROUP = 'default';
/** ×1 in ten-thousandths. */
export const UNIT_E4 = 10_000n;

export interface PriceGroup {
  name: string;
  multiplierE4: bigint;
  description: string | null;
}

export interface PriceGroupInput {
  name: string;
  multiplier: number;
  description?: string | null;
}

/** 0 < m ≤ 10 with at most 4 decimals, exactly, in ten-thousandths; 400 otherwise (never rounded). */
function multiplierE4(name: string, m: number): bigint {
  const parts = Number.isFinite(m) ? /^(\d+)(?:\.(\d{1,4}))?$/.exec(String(m)) : null;
  const e4 = parts ? BigInt(parts[1]!) * UNIT_E4 + BigInt((parts[2] ?? '').padEnd(4, '0')) : 0n;
  if (!parts || e4 <= 0n || e4 > 10n * UNIT_E4) throw new AppError('invalid', `${name}: multiplier must be above 0 and at most 10, with at most 4 decimals`);
  return e4;
}

export const multiplierOf = (e4: bigint) => Number(e4) / 10_000;

export function createPriceGroups(ctx: AppContext) {
  const { db } = ctx.database;
  const defaultGroup: PriceGroup = { name: DEFAULT_GROUP, multiplierE4: UNIT_E4, description: null };
  let groups: PriceGroup[] = [defaultGroup];
  let byName = new Map<string, PriceGroup>([[DEFAULT_GROUP, defaultGroup]]);
  let groupOfUser = new Map<string, string>();

  const reload = serialReload(async () => {
    const g = await db.select().from(priceGroups).orderBy(asc(priceGroups.position));
    const u = await db.select().from(userPriceGroups);
    const stored = g.map((r) => ({ name: r.name, multiplierE4: BigInt(r.multiplierE4), description: r.description }));
    groups = stored.some((r) => r.name === DEFAULT_GROUP) ? stored : [defaultGroup, ...stored];
    byName = new Map(groups.map((r) => [r.name, r]));
    groupOfUser = new Map(u.map((r) => [r.userId, r.groupName]));
  });

  /** A user's group (default when none, or when theirs is gone). */
  const groupOf = (userId: string | null | undefined): PriceGroup => byName.get((userId && groupOfUser.get(userId)) || DEFAULT_GROUP) ?? defaultGroup;

  const view = (g: PriceGroup) => ({ name: g.name, multiplier: multiplierOf(g.multiplierE4), description: g.description });

  return {
    load: () => followChanges(ctx, CHANNEL, reload, 'price groups'),
    groupOf,
    list: () => ({ groups: groups.map(view) }),
    view,

    /**
     * Replaces the groups. `default` is kept at ×1 whether listed or not; users of a group that is
     * no longer listed go back to `default`.
     */
    async replace(input: PriceGroupInput[]) {
      const rows = input.map((g) => ({ ...g, e4: multiplierE4(g.name, g.multiplier) }));
      const seen = new Set<string>();
      for (const r of rows) {
        if (seen.has(r.name)) throw new AppError('invalid', `duplicate group "${r.name}"`);
        seen.add(r.name);
        if (r.name === DEFAULT_GROUP && r.e4 !== UNIT_E4) throw new AppError('invalid', 'the default group\'s multiplier is 1');
      }
      if (!seen.has(DEFAULT_GROUP)) rows.unshift({ name: DEFAULT_GROUP, multiplier: 1, description: null, e4: UNIT_E4 });
      await db.transaction(async (tx) => {
        await tx.delete(priceGroups);
        await tx.insert(priceGroups).values(rows.map((r, position) => ({ name: r.name, multiplierE4: Number(r.e4), description: r.description ?? null, position })));
        await tx.delete(userPriceGroups).where(notInArray(userPriceGroups.groupName, rows.map((r) => r.name)));
        await ctx.database.notify(CHANNEL, 'groups', tx);
      });
      await reload();
      return { groups: groups.map(view) };
    },

    /** Places a user in a group; an unknown group is 400. Read from the database: the shell's processes load no cache. */
    async assign(userId: string, name: string) {
      await db.transaction(async (tx) => {
        const [known] = name === DEFAULT_GROUP ? [true] : await tx.select({ name: priceGroups.name }).from(priceGroups).where(eq(priceGroups.name, name)).for('share');
        if (!known) throw new AppError('invalid', `price group "${name}" does not exist`);
        if (name === DEFAULT_GROUP) await tx.delete(userPriceGroups).where(eq(userPriceGroups.userId, userId));
        else
          await tx
            .insert(userPriceGroups)
            .values({ userId, groupName: name })
            .onConflictDoUpdate({ target: userPriceGroups.userId, set: { groupName: name } });
        await ctx.database.notify(CHANNEL, 'users', tx);
      });
      await reload();
    },

    /** Group names of many users at once (admin views), from the database. */
    async namesOf(userIds: string[]): Promise<Map<string, string>> {
      const rows = userIds.length ? await db.select().from(userPriceGroups).where(inArray(userPriceGroups.userId, userIds)) : [];
      const named = new Map(rows.map((r) => [r.userId, r.groupName]));
      return new Map(userIds.map((id) => [id, named.get(id) ?? DEFAULT_GROUP]));
    },
  };
}

export type PriceGroups = ReturnType<typeof createPriceGroups>;